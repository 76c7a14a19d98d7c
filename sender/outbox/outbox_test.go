package outbox_test

import (
	"bytes"
	"errors"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/mailpittest"
	"github.com/weeklydigest/digest/sender"
	"github.com/weeklydigest/digest/sender/outbox"
)

func newOutbox(t *testing.T) *outbox.Outbox {
	t.Helper()
	o, err := outbox.New(outbox.Config{
		Dir:  filepath.Join(t.TempDir(), "outbox"),
		From: digest.Address{Name: "Digest", Email: "digest@example.com"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestOutboxSendThenLookup(t *testing.T) {
	t.Parallel()
	o := newOutbox(t)
	ctx := t.Context()
	key := testKey("k1", 'a')
	if _, found, err := o.Lookup(ctx, key); err != nil || found {
		t.Fatalf("Lookup before send = %v, %v", found, err)
	}
	ref, err := o.Send(ctx, testMessage(key))
	if err != nil || ref != outbox.FileName(key) {
		t.Fatalf("Send = %q, %v; want %q", ref, err, outbox.FileName(key))
	}
	got, found, err := o.Lookup(ctx, key)
	if err != nil || !found || got != ref {
		t.Fatalf("Lookup = %q, %v, %v; want %q, true", got, found, err, ref)
	}
	raw, err := os.ReadFile(filepath.Join(o.Dir(), ref))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if h := msg.Header.Get("Message-ID"); h != "<"+key.Hex()+"@example.com>" {
		t.Errorf("Message-ID = %q", h)
	}
	// The same multipart/alternative message the SMTP mailer sends.
	if p, err := mailpittest.Parse(raw); err != nil || strings.Join(p.Types, ",") != "text/plain,text/html" || p.Text == "" || p.HTML == "" {
		t.Errorf("parts: %+v, %v; want a text and an HTML part", p, err)
	}
}

func TestOutboxSameKeyKeepsOneFile(t *testing.T) {
	t.Parallel()
	o := newOutbox(t)
	ctx := t.Context()
	key := testKey("k1", 'b')
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			if _, err := o.Send(ctx, testMessage(key)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(o.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != outbox.FileName(key) {
		t.Fatalf("outbox holds %v, want only %s (no temporary files)", entries, outbox.FileName(key))
	}
}

func TestOutboxLookupRejectsIncompleteFile(t *testing.T) {
	t.Parallel()
	o := newOutbox(t)
	key := testKey("k1", 'c')
	// A file with the right name but another key, as a hand edit would leave.
	if err := os.WriteFile(filepath.Join(o.Dir(), outbox.FileName(key)), []byte("Subject: x\r\n\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, found, err := o.Lookup(t.Context(), key); err == nil || found {
		t.Fatalf("Lookup = %v, %v; want an error (could not tell)", found, err)
	}
}

func TestOutboxInvalidAddressIsPermanent(t *testing.T) {
	t.Parallel()
	o := newOutbox(t)
	msg := testMessage(testKey("k1", 'd'))
	msg.To.Email = "bad\r\naddress"
	_, err := o.Send(t.Context(), msg)
	if digest.SendClassOf(err) != digest.SendPermanent || !errors.Is(err, sender.ErrInvalidAddress) {
		t.Fatalf("Send = %v; want permanent ErrInvalidAddress", err)
	}
}

// testKey returns a valid key whose hex part repeats c.
func testKey(kid string, c byte) digest.Key {
	return digest.Key(kid + ":" + strings.Repeat(string(c), 64))
}

func testMessage(key digest.Key) *digest.Message {
	to := digest.Address{Name: "Grace Hopper", Email: "grace@example.net"}
	return &digest.Message{Key: key, To: to, Subject: "Your week", Text: "Hello Grace,\n", HTML: "<p>Hello Grace,</p>"}
}
