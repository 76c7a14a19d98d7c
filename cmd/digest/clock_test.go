package main

import (
	"bytes"
	"context"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The clock comes from Env: with no --week or date, the commands take the
// week of Env.Now, not of the machine's clock, and the messages are dated
// by it.
func TestClockIsInjected(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC) // Monday of 2026-W49
	vars := map[string]string{
		"DIGEST_HMAC_KEYS":   testKeys,
		"DIGEST_LEDGER_PATH": filepath.Join(dir, "digest.db"),
		"DIGEST_OUTBOX_DIR":  filepath.Join(dir, "outbox"),
	}
	main := func(now time.Time, args ...string) (stdout, stderr string) {
		t.Helper()
		var out, errb bytes.Buffer
		env := &Env{Getenv: func(k string) string { return vars[k] }, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb,
			Now: func() time.Time { return now }}
		if code := Main(context.Background(), args, env); code != 0 {
			t.Fatalf("digest %v: exit %d\n%s%s", args, code, out.String(), errb.String())
		}
		return out.String(), errb.String()
	}

	if got, _ := main(time.Date(2031, 6, 15, 12, 0, 0, 0, time.UTC), "week"); got != "2031-W24 2031-06-09T00:00:00Z 2031-06-16T00:00:00Z\n" {
		t.Errorf("digest week on 2031-06-15 = %q, want 2031-W24", got)
	}
	// run without --week: the week before now, 2026-W48 (the sample's),
	// its source pinned at its end plus DIGEST_SETTLE (not now), and its
	// messages dated now.
	_, log := main(now, "run", "--snapshot", filepath.Join("..", "..", "examples", "snapshot.jsonl"))
	if !strings.Contains(log, `"week":"2026-W48"`) || !strings.Contains(log, `"as_of":"2026-11-30T04:00:00Z"`) {
		t.Fatalf("digest run at %s: want week 2026-W48 as of then; log:\n%s", now, log)
	}
	files, err := filepath.Glob(filepath.Join(dir, "outbox", "*.eml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("outbox holds %v (%v), want the week's messages", files, err)
	}
	f, err := os.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	msg, err := mail.ReadMessage(f)
	if err != nil {
		t.Fatal(err)
	}
	if date, err := msg.Header.Date(); err != nil || !date.Equal(now) {
		t.Errorf("Date: %v (%v), want %s", date, err, now)
	}
}
