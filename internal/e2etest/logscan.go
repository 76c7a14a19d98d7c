package e2etest

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
)

// ScanLogs, set by a suite's TestMain before m.Run, makes every Env of the
// suite keep what each command it runs writes to stderr (its log records)
// and, when its test ends, fail the test if a record names an email
// address in clear: docs/security.md promises an address_key (an HMAC),
// never the address. A record is refused when it holds the local part of
// an address the test used (Seed's customers, UsesAddresses), which also
// catches an address quoted malformed ("customer0000001 @example.com").
// (Help texts and refusals of a setting quote example and configured
// addresses, the sender's own: those are no customer's.)
var ScanLogs bool

// logScan is one Env's kept stderr and the addresses its test used.
type logScan struct {
	mu   sync.Mutex
	logs []*lockedBuffer
	used map[string]bool
}

// lockedBuffer is a command's stderr, written by exec's copying goroutine
// and read at the test's end.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// sink returns a new buffer for one command's stderr, kept for the scan.
func (s *logScan) sink() *lockedBuffer {
	b := &lockedBuffer{}
	s.mu.Lock()
	s.logs = append(s.logs, b)
	s.mu.Unlock()
	return b
}

// UsesAddresses adds addresses the test put in the source, so that the
// log scan (ScanLogs) looks for them too. Seed adds its customers'.
func (e *Env) UsesAddresses(addrs ...string) {
	if e.scan == nil {
		return
	}
	e.scan.mu.Lock()
	defer e.scan.mu.Unlock()
	for _, a := range addrs {
		e.scan.used[strings.ToLower(a)] = true
	}
}

// Logged adds the stderr of a command the test ran itself (Command with
// its own Stderr) to the log scan.
func (e *Env) Logged(stderr string) {
	if e.scan == nil {
		return
	}
	_, _ = e.scan.sink().Write([]byte(stderr))
}

// scanLogs fails the test for every log record naming an address.
func (e *Env) scanLogs() {
	if e.scan == nil {
		return
	}
	e.scan.mu.Lock()
	defer e.scan.mu.Unlock()
	var locals []string
	for a := range e.scan.used {
		local, _, _ := strings.Cut(a, "@")
		if len(local) < 6 {
			local = a // too short to be told from other text
		}
		locals = append(locals, local)
	}
	records, refused, commands := 0, 0, 0
	for _, b := range e.scan.logs {
		if b.String() != "" {
			commands++
		}
		for line := range strings.Lines(b.String()) {
			records++
			low := strings.ToLower(line)
			why := ""
			for _, l := range locals {
				if strings.Contains(low, l) {
					why = fmt.Sprintf("the address of %q, a customer of the test", l)
					break
				}
			}
			if why != "" {
				refused++
				if refused <= 5 {
					e.T.Errorf("a log record names %s in clear (docs/security.md: an address_key, never the address):\n%s", why, line)
				}
			}
		}
	}
	if refused > 5 {
		e.T.Errorf("%d log records name an address in clear, the first 5 above", refused)
	}
	e.T.Logf("log scan: %d records of %d commands, %d addresses looked for", records, commands, len(locals))
}
