package mailpittest_test

import (
	"bytes"
	"context"
	"net/smtp"
	"testing"

	"github.com/weeklydigest/digest/internal/mailpittest"
)

func TestStartReceivesMail(t *testing.T) {
	t.Parallel()
	s := mailpittest.Start(t)
	ctx := context.Background()

	n, err := s.Count(ctx)
	if err != nil || n != 0 {
		t.Fatalf("Count on a fresh server = %d, %v; want 0, nil", n, err)
	}
	body := "From: a@example.com\r\nTo: b@example.com\r\nSubject: hello\r\n\r\nbody\r\n"
	if err := smtp.SendMail(s.SMTPAddr(), nil, "a@example.com", []string{"b@example.com"}, []byte(body)); err != nil {
		t.Fatalf("SendMail: %v", err)
	}
	msgs, err := s.Messages(ctx)
	if err != nil || len(msgs) != 1 || msgs[0].Subject != "hello" {
		t.Fatalf("Messages = %+v, %v; want one message with subject hello", msgs, err)
	}
	raw, err := s.Raw(ctx, msgs[0].ID)
	if err != nil || !bytes.Contains(raw, []byte("Subject: hello")) {
		t.Fatalf("Raw = %q, %v", raw, err)
	}
	if n, err := s.Count(ctx); err != nil || n != 1 {
		t.Fatalf("Count = %d, %v; want 1", n, err)
	}
}
