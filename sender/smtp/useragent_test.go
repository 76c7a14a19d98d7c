package smtp_test

import (
	"bytes"
	"net/mail"
	"testing"
)

// TestNoMailerHeader: the raw message a server receives names no library
// and version (go-mail adds User-Agent and X-Mailer unless told not to).
func TestNoMailerHeader(t *testing.T) {
	t.Parallel()
	srv := startSMTP(t, fault{})
	m := newMailer(t, srv.addr, nil)
	if _, err := m.Send(ctxT(t), testMessage(testKey("ua", 'c'))); err != nil {
		t.Fatal(err)
	}
	got := srv.messages()
	if len(got) != 1 {
		t.Fatalf("server received %d messages, want 1", len(got))
	}
	msg, err := mail.ReadMessage(bytes.NewReader(got[0].data))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"User-Agent", "X-Mailer"} {
		if v := msg.Header.Get(h); v != "" {
			t.Errorf("%s: %q, want no such header", h, v)
		}
	}
	if msg.Header.Get("X-Digest-Key") == "" {
		t.Fatal("the message lacks X-Digest-Key: wrong message read")
	}
}
