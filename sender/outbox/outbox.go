// Package outbox is the embedded mail provider: a directory of .eml
// files, one per digest key, each the message package sender renders, the
// bytes the SMTP adapter sends. It is a digest.Mailer and, since it holds
// what it "sent", its own digest.Lookup.
package outbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/mail"
	"os"
	"path/filepath"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/sender"
)

// DefaultDir is the outbox directory when none is configured.
const DefaultDir = "outbox"

// Config configures an Outbox.
type Config struct {
	// Dir holds one .eml file per key; created if missing. Default
	// DefaultDir (relative to the working directory).
	Dir string
	// From and ListUnsubscribe are as in sender.NewEnvelope.
	From            digest.Address
	ListUnsubscribe string
	// Now stamps the Date header. Default time.Now.
	Now func() time.Time
}

// Outbox is the embedded mail provider: it "sends" a message by writing it
// as a complete RFC 5322 file named by its key, and answers look-ups by
// that file. A crash leaves either no file or the whole message: each is
// written to a temporary file in the same directory, synced, then linked
// into place (the first message for a key wins; a second Send of the same
// key keeps the one file), and the directory synced.
type Outbox struct {
	dir string
	env sender.Envelope
	now func() time.Time
}

var (
	_ digest.Mailer = (*Outbox)(nil)
	_ digest.Lookup = (*Outbox)(nil)
)

// New validates cfg and creates the directory.
func New(cfg Config) (*Outbox, error) {
	env, err := sender.NewEnvelope(cfg.From, cfg.ListUnsubscribe)
	if err != nil {
		return nil, fmt.Errorf("outbox config: %w", err)
	}
	if cfg.Dir == "" {
		cfg.Dir = DefaultDir
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return &Outbox{dir: cfg.Dir, env: env, now: cfg.Now}, nil
}

// FileName returns the outbox file name of key: KID_HEX.eml (':' is not
// allowed in file names everywhere).
func FileName(key digest.Key) string { return key.KeyID() + "_" + key.Hex() + ".eml" }

// Dir returns the outbox directory.
func (o *Outbox) Dir() string { return o.dir }

// Send writes m to the outbox and returns its file name as the reference.
func (o *Outbox) Send(ctx context.Context, m *digest.Message) (string, error) {
	msg, err := o.env.Render(m, o.now())
	if err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", temporary(err)
	}
	name := FileName(m.Key)
	final := filepath.Join(o.dir, name)
	if _, err := os.Lstat(final); err == nil {
		return name, nil
	}
	tmp, err := os.CreateTemp(o.dir, ".tmp-*.eml")
	if err != nil {
		return "", temporary(fmt.Errorf("outbox: %w", err))
	}
	defer os.Remove(tmp.Name()) // after the link, or on failure
	_, err = tmp.Write(msg)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", temporary(fmt.Errorf("outbox: write %s: %w", name, err))
	}
	// Link fails if the name exists, so a concurrent Send of the same key
	// cannot replace a file a look-up has already seen.
	if err := os.Link(tmp.Name(), final); err != nil && !errors.Is(err, fs.ErrExist) {
		if err := os.Rename(tmp.Name(), final); err != nil {
			return "", temporary(fmt.Errorf("outbox: %w", err))
		}
	}
	if err := syncDir(o.dir); err != nil {
		// The file is complete and visible; only its durability across a
		// power loss is in doubt.
		return "", &digest.SendError{Class: digest.SendAmbiguous, Err: fmt.Errorf("outbox: sync dir: %w", err)}
	}
	return name, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Lookup reports whether the outbox holds the complete message for key:
// the file exists, parses as a message, and carries key in its X-Digest-Key
// header. The reference is the file name.
func (o *Outbox) Lookup(ctx context.Context, key digest.Key) (string, bool, error) {
	if err := ctx.Err(); err != nil {
		return "", false, err
	}
	name := FileName(key)
	f, err := os.Open(filepath.Join(o.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("outbox lookup: %w", err)
	}
	defer f.Close()
	msg, err := mail.ReadMessage(bufio.NewReader(f))
	if err != nil {
		return "", false, fmt.Errorf("outbox lookup %s: not a complete message: %w", name, err)
	}
	if got := msg.Header.Get(sender.HeaderKey); got != string(key) {
		return "", false, fmt.Errorf("outbox lookup %s: %s is %q, want %q", name, sender.HeaderKey, got, key)
	}
	return name, true, nil
}

// temporary wraps err as a temporary failure.
func temporary(err error) error {
	return &digest.SendError{Class: digest.SendTemporary, Err: err}
}

// Close does nothing; an Outbox holds no open files between calls.
func (o *Outbox) Close() error { return nil }
