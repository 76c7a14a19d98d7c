package faults

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/e2etest"
	"github.com/weeklydigest/digest/ledger/postgres"
	"github.com/weeklydigest/digest/run"
	"github.com/weeklydigest/digest/sender/mailpit"
	"github.com/weeklydigest/digest/sender/smtp"
	"github.com/weeklydigest/digest/snapshot"
)

// inProcess is the run loop wired as cmd/digest wires it (PostgreSQL
// ledger and source, SMTP mailer), in-process so a test can move the clock
// and shorten the backoff.
type inProcess struct {
	store  *postgres.Store
	pool   *pgxpool.Pool // the store's, and the source's
	mailer *smtp.Mailer
	now    func() time.Time
}

func openInProcess(t *testing.T, e *e2etest.Env, now func() time.Time, smtpAddr string) *inProcess {
	t.Helper()
	pool, err := postgres.NewPool(context.Background(), e.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := postgres.New(pool, postgres.Config{Now: now})
	smtpURL, err := smtp.ParseSMTPURL("smtp://" + smtpAddr + "?tls=none")
	if err != nil {
		t.Fatal(err)
	}
	m, err := smtp.NewMailer(smtp.Config{
		SMTP: smtpURL, From: digest.Address{Name: "Digest", Email: "digest@bank.example"}, Concurrency: 4, Now: now,
		Timeout: 500 * time.Millisecond, // a send may take 1s: the tests' 2s leases cover it
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return &inProcess{store: store, pool: pool, mailer: m, now: now}
}

func (p *inProcess) runner(t *testing.T, cfg run.Config, lookup digest.Lookup) *run.Runner {
	t.Helper()
	kr, err := digest.ParseKeyring(e2etest.TestKeyring)
	if err != nil {
		t.Fatal(err)
	}
	rend, err := digest.NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Spec = digest.Spec{Week: week40, Location: time.UTC, Type: "weekly_activity", Version: "v1"}
	cfg.RunID = "faults-" + t.Name()
	cfg.Now = p.now
	cfg.SendWorstCase = p.mailer.WorstCase()
	return &run.Runner{
		Ledger: p.store, Source: snapshot.NewPostgres(p.pool, 0), Keyring: kr, Renderer: rend,
		Mailer: p.mailer, Lookup: lookup, Config: cfg,
	}
}

// The week is sent, then replayed after the queue window: the clock moved
// six minutes and seven days ahead (a CronJob retried a week later, an
// operator's backfill). A queue's five-minute duplicate filter has long
// forgotten; the ledger has not: zero sends.
func TestReplayAfterQueueWindowSendsNothing(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(200, week40)
	first := e.MustRun("run", "--week", week40s)
	if first.Count(t, "sent") != len(want) {
		t.Fatalf("first run sent %d, want %d", first.Count(t, "sent"), len(want))
	}

	shift := 7*24*time.Hour + 6*time.Minute
	later := func() time.Time { return time.Now().Add(shift) }
	p := openInProcess(t, e, later, e.Mailpit.SMTPAddr())
	r := p.runner(t, run.Config{Lease: 2 * time.Second}, mailpit.New(mailpit.Config{Base: e.Mailpit.APIURL()}))
	sum, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sum.Sent != 0 || sum.Reconciled != 0 || sum.Duplicates != len(want) || !sum.Complete() {
		t.Fatalf("replay a week later: %+v; want nothing sent and %d duplicates", sum, len(want))
	}
	if got := sum.DuplicateAges[run.AgeLater]; got != len(want) {
		t.Fatalf("duplicates by age %v: want all %d in %q", sum.DuplicateAges, len(want), run.AgeBucketNames[run.AgeLater])
	}
	e.AssertExactlyOnce(want)
	t.Logf("NUMBERS replay: shift=%s sends=%d duplicates=%d ages=%v", shift, sum.Sent, sum.Duplicates, sum.DuplicateAges)
}
