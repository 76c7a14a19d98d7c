package bench

import (
	"context"
	"fmt"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger/postgres"
	"github.com/weeklydigest/digest/run"
	"github.com/weeklydigest/digest/snapshot"
)

// backendPIDs opens every connection of the pool and returns their
// backends' process ids, so that their CPU time can be read around the
// run. The pool keeps idle connections for far longer than a run.
func backendPIDs(ctx context.Context, pool *pgxpool.Pool) ([]uint32, error) {
	n := int(pool.Config().MaxConns)
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	var pids []uint32
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return nil, fmt.Errorf("bench: acquire: %w", err)
		}
		conns = append(conns, c)
		pids = append(pids, c.Conn().PgConn().PID())
	}
	return pids, nil
}

// runWeek runs the week through the real Runner, ledger, source and mailer,
// the ledger and the source on pool, and fills the run's part of res.
func runWeek(ctx context.Context, cfg *Config, store *postgres.Store, pool *pgxpool.Pool, addr string, res *Result) error {
	keyring, err := newKeyring()
	if err != nil {
		return err
	}
	renderer, err := digest.NewRenderer()
	if err != nil {
		return err
	}
	mailer, err := newMailer(addr, cfg.Concurrency)
	if err != nil {
		return fmt.Errorf("bench: mailer: %w", err)
	}
	defer mailer.Close()
	timed := newTimedLedger(store)
	r := &run.Runner{
		Ledger: timed, Mailer: mailer, Source: snapshot.NewPostgres(pool, 0),
		Keyring: keyring, Renderer: renderer,
		Config: run.Config{
			Spec:        digest.Spec{Week: cfg.Week, Location: time.UTC, Type: "weekly_activity", Version: "v1"},
			Concurrency: cfg.Concurrency, BatchSize: cfg.BatchSize,
			RunID: "bench", Logger: cfg.Logger,
		},
	}
	var walBefore string
	if err := pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&walBefore); err != nil {
		return fmt.Errorf("bench: wal position: %w", err)
	}

	runtime.GC()
	res.PeakRSSFrom = "run"
	if !resetPeakRSS() {
		res.PeakRSSFrom = "process" // the kernel refused the reset: the peak covers seeding too
	}
	heap := sampleHeap()
	if cfg.CPUProfile != nil {
		if err := pprof.StartCPUProfile(cfg.CPUProfile); err != nil {
			return fmt.Errorf("bench: cpu profile: %w", err)
		}
	}
	pids, err := backendPIDs(ctx, pool)
	if err != nil {
		return err
	}
	cpu0, pg0 := processCPU(), backendCPU(pids)
	t0 := time.Now()
	sum, err := r.Run(ctx)
	res.RunTime = time.Since(t0)
	res.ProcessCPU, res.PostgresCPU = processCPU()-cpu0, backendCPU(pids)-pg0
	if cfg.CPUProfile != nil {
		pprof.StopCPUProfile()
	}
	res.HeapInUse = heap.stop()
	res.PeakRSS = peakRSS()
	res.HeapAtEnd = heapInUse()
	res.Summary = sum
	res.Ledger = timed.snapshot()
	if err != nil {
		return fmt.Errorf("bench: run: %w", err)
	}
	if !sum.Complete() || sum.Sent == 0 {
		return fmt.Errorf("bench: run did not complete: %d sent, %d pending, %d failed", sum.Sent, sum.Pending, sum.Failed)
	}
	res.DigestsPS = float64(sum.Sent) / res.RunTime.Seconds()

	err = pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint`, walBefore).Scan(&res.WALBytes)
	if err != nil {
		return fmt.Errorf("bench: wal bytes: %w", err)
	}
	return nil
}
