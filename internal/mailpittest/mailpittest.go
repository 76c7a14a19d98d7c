// Package mailpittest starts a real Mailpit server for tests in any package.
//
// Each call to Start launches its own Mailpit process on free loopback ports
// with its database in the test's temporary directory, waits until its HTTP
// API answers, and kills it when the test ends. The binary is found through
// MAILPIT_BIN, then PATH, then $(go env GOPATH)/bin; scripts/test installs the
// pinned version there. A missing binary fails the test: skipping would let a
// machine without Mailpit report a green run that tested nothing.
package mailpittest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Version is the Mailpit release the tests are written against.
const Version = "v1.33.1"

// readyTimeout bounds how long Start waits for Mailpit to answer.
const readyTimeout = 20 * time.Second

// Server is one running Mailpit instance.
type Server struct {
	smtpAddr string
	apiURL   string
	client   *http.Client
}

// Message is the part of Mailpit's message summary the tests use.
type Message struct {
	ID        string   `json:"ID"`
	MessageID string   `json:"MessageID"`
	Subject   string   `json:"Subject"`
	Tags      []string `json:"Tags"`
}

// Binary returns the path of the Mailpit binary, or an error naming the
// command that installs it.
func Binary() (string, error) {
	if p := os.Getenv("MAILPIT_BIN"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("mailpit"); err == nil {
		return p, nil
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		out, err := exec.Command("go", "env", "GOPATH").Output()
		if err == nil {
			gopath = string(bytes.TrimSpace(out))
		}
	}
	if gopath != "" {
		p := filepath.Join(gopath, "bin", "mailpit")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("mailpit not found (MAILPIT_BIN, PATH, $(go env GOPATH)/bin); install it with: go install github.com/axllent/mailpit@%s", Version)
}

// Start launches Mailpit on free loopback ports and returns once its API
// answers. SMTP accepts any credentials, also without TLS, so tests can
// exercise authentication with tls=none. The process is killed in
// t.Cleanup. Under go test -short (make check) the test skips: the edit
// loop starts no services.
func Start(t testing.TB) *Server {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Mailpit: skipped under -short (make check); make test runs it")
	}
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	var lastErr error
	// A port taken between freePort and Mailpit's bind makes Mailpit exit;
	// try again on fresh ports a few times.
	for range 3 {
		s, err := start(t, bin)
		if err == nil {
			return s
		}
		lastErr = err
	}
	t.Fatalf("start mailpit: %v", lastErr)
	return nil
}

func start(t testing.TB, bin string) (*Server, error) {
	t.Helper()
	smtpPort, err := freePort()
	if err != nil {
		return nil, err
	}
	httpPort, err := freePort()
	if err != nil {
		return nil, err
	}
	dir := t.TempDir()
	s := &Server{
		smtpAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(smtpPort)),
		apiURL:   "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(httpPort)),
		client:   &http.Client{Timeout: 5 * time.Second},
	}
	var logs bytes.Buffer
	cmd := exec.Command(bin,
		"--smtp", s.smtpAddr,
		"--listen", net.JoinHostPort("127.0.0.1", strconv.Itoa(httpPort)),
		"--database", filepath.Join(dir, "mailpit.db"),
		"--smtp-auth-accept-any",
		"--smtp-auth-allow-insecure",
		"--disable-version-check",
		// Keep every message: by default Mailpit prunes all but the newest
		// 500 every minute, and a test counting its messages after that
		// would see sent digests as missing.
		"--max", "0",
		"--quiet",
	)
	cmd.Stdout = &logs
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("run %s: %w", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}

	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.ready(ctx) {
			t.Cleanup(stop)
			return s, nil
		}
		select {
		case err := <-exited:
			exited <- err
			return nil, fmt.Errorf("mailpit exited: %v: %s", err, logs.String())
		case <-ctx.Done():
			stop()
			return nil, fmt.Errorf("mailpit not ready after %s: %s", readyTimeout, logs.String())
		case <-tick.C:
		}
	}
}

func (s *Server) ready(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.apiURL+"/api/v1/info", nil)
	if err != nil {
		return false
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// SMTPAddr returns Mailpit's SMTP address, host:port.
func (s *Server) SMTPAddr() string { return s.smtpAddr }

// APIURL returns the base URL of Mailpit's HTTP API, without a trailing
// slash, e.g. http://127.0.0.1:41234.
func (s *Server) APIURL() string { return s.apiURL }

// Messages returns the summaries of all stored messages, newest first.
func (s *Server) Messages(ctx context.Context) ([]Message, error) {
	var out struct {
		Messages []Message `json:"messages"`
	}
	if err := s.getJSON(ctx, "/api/v1/messages?limit=1000", &out); err != nil {
		return nil, err
	}
	return out.Messages, nil
}

// Count returns the number of stored messages.
func (s *Server) Count(ctx context.Context) (int, error) {
	var out struct {
		Total int `json:"total"`
	}
	if err := s.getJSON(ctx, "/api/v1/messages?limit=1", &out); err != nil {
		return 0, err
	}
	return out.Total, nil
}

// Raw returns the message with Mailpit id as received, headers and body.
func (s *Server) Raw(ctx context.Context, id string) ([]byte, error) {
	resp, err := s.get(ctx, "/api/v1/message/"+url.PathEscape(id)+"/raw")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

func (s *Server) getJSON(ctx context.Context, path string, v any) error {
	resp, err := s.get(ctx, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("mailpit %s: decode: %w", path, err)
	}
	return nil
}

func (s *Server) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.apiURL+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("mailpit %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("mailpit %s: %s: %s", path, resp.Status, body)
	}
	return resp, nil
}
