package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/smtp"
)

const sendTestHelp = `Usage: digest send-test --to ADDRESS --sample N [--week YYYY-Www] [--snapshot FILE.jsonl]

Sends N real digests of the week, rendered as a run renders them (the first
N customers with activity, in customer id order), to one internal address,
so that a release can be checked in a real inbox before the week goes out.
Each is marked as a test: the subject starts with "[TEST] ", the header
X-Digest-Test is 1, and its key (key id "test", Message-ID, X-Digest-Key)
is random, so a provider look-up of a real digest never finds a test. It
goes through the same SMTP mailer (or outbox) and rate limit as a run, and
outside the ledger: no receipt is created or changed, and the week is not
pinned (a pinned week is read at its pinned cutoff).

Examples:
  digest send-test --to qa@example.com --sample 5 --week 2026-W48
  digest send-test --to qa@example.com --sample 1 --snapshot examples/snapshot.jsonl
`

func cmdSendTest(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "send-test", sendTestHelp)
	st := register(fs, env, "send-test")
	to := fs.String("to", "", "the internal address every test digest goes to (required)")
	sample := fs.Int("sample", 1, "how many customers' digests to send (1 to 100)")
	week := fs.String("week", "", "ISO week YYYY-Www (default: the week before now in DIGEST_TZ)")
	snap := fs.String("snapshot", "", "JSON Lines snapshot file (default: the PostgreSQL source relations)")
	if err := noArgs(fs, args); err != nil {
		return err
	}
	if err := smtp.ValidateAddress(*to); err != nil {
		return usagef("--to: %v", err)
	}
	if *sample < 1 || *sample > 100 {
		return usagef("--sample %d: want 1 to 100", *sample)
	}
	log, ms, vs, err := parseSendTest(st, env, *week)
	if err != nil {
		return err
	}
	wv, err := openWeekView(ctx, env, vs, *snap, log)
	if err != nil {
		return err
	}
	defer wv.close()
	var msgs []*digest.Message
	err = wv.each(ctx, nil, func(d *digest.Digest, msg *digest.Message) bool {
		if !d.Empty() {
			msgs = append(msgs, msg)
		}
		return len(msgs) < *sample
	})
	if err != nil {
		return err
	}
	if len(msgs) == 0 {
		return usagef("no customer has activity in %s: nothing to send", wv.spec.Week)
	}
	m, _, err := openMailer(vs.ledger, ms)
	if err != nil {
		return err
	}
	defer m.Close()
	for _, msg := range msgs {
		msg.Key, msg.Test = digest.TestKey(), true
		msg.To = digest.Address{Email: *to} // the body still greets the customer
		ref, err := m.Send(ctx, msg)
		if err != nil {
			return fmt.Errorf("test send: %w", err)
		}
		log.Info("test digest sent", "key", string(msg.Key), "ref", ref)
	}
	fmt.Fprintf(env.Stdout, "sent %d test digests of %s to %s\n", len(msgs), wv.spec.Week, *to)
	return nil
}

// parseSendTest reads send-test's settings: the log level (its logger is
// the mailer's), the mailer's (one connection) and the week view's.
func parseSendTest(st *settings, env *Env, week string) (*slog.Logger, mailerSettings, weekViewSettings, error) {
	log := newLogger(env, st.logLevel())
	ms, err := readMailer(env, st, 1, log)
	if err != nil {
		return log, ms, weekViewSettings{}, err
	}
	vs, err := parseWeekView(st, env, week)
	return log, ms, vs, err
}
