// Package bench measures a whole week through the real run loop: the
// PostgreSQL ledger and source, the SMTP mailer, and a null SMTP server in
// the same process. In the same invocation it measures a plain go-mail send
// loop to the same server over the same number of connections, so that the
// ratio says what the job adds on top of the unavoidable cost of sending.
//
// It is the driver behind cmd/digest-bench; the package keeps it testable.
package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger/postgres"
	"github.com/weeklydigest/digest/run"
	"github.com/weeklydigest/digest/sender/smtp"
	"github.com/weeklydigest/digest/snapshot"
)

// Config says what to measure. The zero value of each optional field means
// its default.
type Config struct {
	// DatabaseURL is the PostgreSQL server and database; the benchmark
	// works in a schema of its own there. Required.
	DatabaseURL string
	// Schema names the schema to use. Empty: a fresh bench_<random> schema,
	// dropped at the end. A named schema is kept, and its seeded customers
	// are reused when their number matches (seeding a million takes a
	// while); its ledger tables are emptied before the run.
	Schema string
	// Customers to seed and run. Default 20,000.
	Customers int
	// Concurrency is the number of SMTP connections and parallel sends, for
	// the run and the plain loop alike. Default 4.
	Concurrency int
	// BatchSize is the run's keys per ledger round trip. Default 100.
	BatchSize int
	// PlainMessages is how many messages the plain go-mail loop sends.
	// Default min(Customers, 20,000): enough for a stable rate.
	PlainMessages int
	// Week of the seeded activity. Default 2026-W48.
	Week digest.ISOWeek
	// Seed of the synthetic data. Default 1.
	Seed uint64
	// CPUProfile, when set, receives a pprof CPU profile of the run (not
	// of seeding or the plain loop).
	CPUProfile io.Writer
	// Progress, when set, receives one line per phase.
	Progress io.Writer
	// Logger is the run's logger. Default: discard.
	Logger *slog.Logger
}

func (c *Config) setDefaults() error {
	if c.DatabaseURL == "" {
		return errors.New("bench: DatabaseURL is required")
	}
	if c.Customers == 0 {
		c.Customers = 20_000
	}
	if c.Concurrency == 0 {
		c.Concurrency = 4
	}
	if c.BatchSize == 0 {
		c.BatchSize = 100
	}
	if c.PlainMessages == 0 {
		c.PlainMessages = min(c.Customers, 20_000)
	}
	if c.Week == (digest.ISOWeek{}) {
		c.Week = digest.ISOWeek{Year: 2026, Week: 48}
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.Customers < 1:
		return fmt.Errorf("bench: customers %d: want at least 1", c.Customers)
	case c.Concurrency < 1 || c.Concurrency > 256:
		return fmt.Errorf("bench: concurrency %d: want 1 to 256", c.Concurrency)
	case c.PlainMessages < 1:
		return fmt.Errorf("bench: plain messages %d: want at least 1", c.PlainMessages)
	case c.Schema != "" && !validSchema(c.Schema):
		return fmt.Errorf("bench: schema %q: want lower-case letters, digits and '_'", c.Schema)
	}
	return nil
}

func validSchema(s string) bool {
	if s == "" || len(s) > 63 || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// Result is what one benchmark measured.
type Result struct {
	Customers   int
	Concurrency int
	BatchSize   int
	Seeded      bool          // false: the schema's customers were reused
	SeedTime    time.Duration // zero when reused

	Summary    run.Summary   // the run's own summary
	RunTime    time.Duration // wall time of Runner.Run
	DigestsPS  float64       // digests sent per second of the run
	PlainSent  int           // messages the plain loop sent, both halves
	PlainTime  time.Duration
	PlainPS    float64       // plain go-mail loop, messages per second, both halves
	PlainEach  [2]float64    // msg/s of the half before and the half after the run
	PlainCPU   time.Duration // CPU time of the plain loop, null SMTP server included
	Ratio      float64       // DigestsPS / PlainPS
	CallsPerDg float64       // ledger round trips per digest sent
	ServerMsgs int64         // messages the null server received (run + plain loop)
	// ProcessCPU is the CPU time this process used during the run (the
	// null SMTP server's share included); PostgresCPU that of the run's
	// PostgreSQL backends when the server is local, zero for a remote one.
	ProcessCPU, PostgresCPU time.Duration
	// Ledger is the time each ledger method took during the run, by
	// "claim", "start" and "finish".
	Ledger map[string]OpTime

	PeakRSS     int64 // VmHWM during the run (reset before it where the kernel allows), bytes
	PeakRSSFrom string
	HeapInUse   uint64 // peak Go heap in use (objects) sampled during the run, bytes
	HeapAtEnd   uint64 // Go heap in use right after the run, bytes

	ReceiptBytes int64 // pg_total_relation_size of receipts' partitions after the run
	EventBytes   int64 // pg_total_relation_size(receipt_events) after the run
	WALBytes     int64 // WAL written during the run (pg_current_wal_lsn difference)
}

// Run seeds, measures the plain loop, runs the week and reports.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.setDefaults(); err != nil {
		return Result{}, err
	}
	res := Result{Customers: cfg.Customers, Concurrency: cfg.Concurrency, BatchSize: cfg.BatchSize}
	progress := func(format string, args ...any) { fmt.Fprintf(cfg.Progress, "bench: "+format+"\n", args...) }

	ws, err := openSchema(ctx, cfg.DatabaseURL, cfg.Schema)
	if err != nil {
		return res, err
	}
	defer ws.close(ctx)
	dbURL := ws.url

	pool, err := postgres.NewPool(ctx, dbURL)
	if err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	defer pool.Close()
	store := postgres.New(pool, postgres.Config{Logger: cfg.Logger})
	if err := store.Migrate(ctx); err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	if err := seed(ctx, &cfg, pool, &res, progress); err != nil {
		return res, err
	}

	srv, err := startNullSMTP()
	if err != nil {
		return res, err
	}
	defer srv.close()

	// The plain loop runs half before and half after the week, so that a
	// change in the machine's load during the run weighs on both sides.
	plain := func(half int) error {
		n := max(cfg.PlainMessages/2, 1)
		progress("plain go-mail loop: %d messages over %d connections", n, cfg.Concurrency)
		cpu0 := processCPU()
		workers, err := renderedMessages(cfg)
		if err != nil {
			return err
		}
		sent, d, err := plainLoop(ctx, srv.addr, cfg.Concurrency, n, workers)
		res.PlainCPU += processCPU() - cpu0
		res.PlainSent += sent
		res.PlainTime += d
		res.PlainEach[half] = float64(sent) / d.Seconds()
		return err
	}
	if err := plain(0); err != nil {
		return res, err
	}
	progress("run: %d customers through the run loop", cfg.Customers)
	if err := runWeek(ctx, &cfg, store, pool, srv.addr, &res); err != nil {
		return res, err
	}
	if err := plain(1); err != nil {
		return res, err
	}
	res.PlainPS = float64(res.PlainSent) / res.PlainTime.Seconds()
	res.ServerMsgs = srv.count.Load()
	if res.Summary.Sent > 0 {
		res.CallsPerDg = float64(res.Summary.LedgerCalls) / float64(res.Summary.Sent)
	}
	if res.PlainPS > 0 {
		res.Ratio = res.DigestsPS / res.PlainPS
	}
	if err := ledgerSizes(ctx, pool, &res); err != nil {
		return res, err
	}
	return res, nil
}

// workSchema is the schema a measurement works in.
type workSchema struct {
	admin *pgx.Conn // outside the schema (no search_path)
	name  string
	url   string // the database URL with the schema as search_path
	keep  bool
}

// openSchema creates the schema named (or a fresh bench_<random> one,
// dropped by close).
func openSchema(ctx context.Context, databaseURL, name string) (*workSchema, error) {
	ws := &workSchema{name: name, keep: name != ""}
	if ws.name == "" {
		ws.name = "bench_" + randomHex(6)
	}
	var err error
	if ws.url, err = withSearchPath(databaseURL, ws.name); err != nil {
		return nil, err
	}
	if ws.admin, err = pgx.Connect(ctx, databaseURL); err != nil {
		return nil, fmt.Errorf("bench: connect: %w", err)
	}
	if _, err := ws.admin.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+ws.name); err != nil {
		ws.admin.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("bench: create schema: %w", err)
	}
	return ws, nil
}

func (ws *workSchema) close(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	if !ws.keep {
		_, _ = ws.admin.Exec(ctx, "DROP SCHEMA "+ws.name+" CASCADE")
	}
	ws.admin.Close(ctx)
}

// seed loads the synthetic customers unless the schema already holds
// exactly that many, and empties the ledger so the run starts from nothing.
func seed(ctx context.Context, cfg *Config, pool *pgxpool.Pool, res *Result, progress func(string, ...any)) error {
	var have int64
	err := pool.QueryRow(ctx, `SELECT count(*) FROM digest_customers`).Scan(&have)
	if err != nil {
		have = -1 // the table does not exist yet
	}
	if have != int64(cfg.Customers) {
		if have > 0 {
			if _, err := pool.Exec(ctx, `DROP TABLE digest_customers, digest_activity`); err != nil {
				return fmt.Errorf("bench: drop old source tables: %w", err)
			}
		}
		progress("seeding %d customers with COPY", cfg.Customers)
		t0 := time.Now()
		if _, _, err := snapshot.Seed(ctx, pool, snapshot.Synthetic(cfg.Customers, cfg.Week, cfg.Seed)); err != nil {
			return fmt.Errorf("bench: seed: %w", err)
		}
		res.Seeded, res.SeedTime = true, time.Since(t0)
	} else {
		progress("reusing %d seeded customers", have)
	}
	if _, err := pool.Exec(ctx, `TRUNCATE receipts, receipt_events, snapshot_pins, observations, prune_tombstones, week_runs, run_ends, week_expectations, week_state_counts`); err != nil {
		return fmt.Errorf("bench: empty the ledger: %w", err)
	}
	return nil
}

// newKeyring returns a keyring with one random secret: the benchmark's
// keys mean nothing outside its schema.
func newKeyring() (*digest.Keyring, error) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return digest.ParseKeyring("bench:" + base64.StdEncoding.EncodeToString(b))
}

func newMailer(addr string, conns int) (*smtp.Mailer, error) {
	smtpURL, err := smtp.ParseSMTPURL("smtp://" + addr + "?tls=none")
	if err != nil {
		return nil, err
	}
	// Far above what one machine reaches, so the limiter's cost is in the
	// measurement but its wait is not.
	lim, err := smtp.NewLimiter(1e6, 1000)
	if err != nil {
		return nil, err
	}
	return smtp.NewMailer(smtp.Config{
		SMTP: smtpURL, From: digest.Address{Name: "Account digest", Email: "digest@example.com"},
		Concurrency: conns, Limiter: lim, HELO: "localhost",
	})
}

func ledgerSizes(ctx context.Context, pool *pgxpool.Pool, res *Result) error {
	err := pool.QueryRow(ctx, `SELECT (SELECT sum(pg_total_relation_size(relid))::bigint FROM pg_partition_tree('receipts')),
	pg_total_relation_size('receipt_events')`).
		Scan(&res.ReceiptBytes, &res.EventBytes)
	if err != nil {
		return fmt.Errorf("bench: ledger sizes: %w", err)
	}
	return nil
}

func withSearchPath(connString, schema string) (string, error) {
	if !strings.HasPrefix(connString, "postgres://") && !strings.HasPrefix(connString, "postgresql://") {
		return connString + " search_path=" + schema, nil
	}
	return setQuery(connString, "search_path", schema)
}

// setQuery sets one parameter of a postgres:// URL.
func setQuery(connString, key, value string) (string, error) {
	u, err := url.Parse(connString)
	if err != nil {
		return "", errors.New("bench: cannot parse the database URL")
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
