package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weeklydigest/digest/ledger"
)

// PoolConfig parses databaseURL (a pgx connection string; pool settings
// such as pool_max_conns are accepted) into the configuration of a pool
// for the ledger: the URL's settings with the session settings the
// ledger's statements rely on.
func PoolConfig(databaseURL string) (*pgxpool.Config, error) {
	if databaseURL == "" {
		return nil, fmt.Errorf("%w: open postgres: the database URL is empty", ledger.ErrInvalid)
	}
	pc, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		// The parse error can quote the URL with its password; don't wrap it.
		return nil, fmt.Errorf("open postgres: cannot parse the database URL")
	}
	// Plan every statement with its actual arguments and the table's
	// current size. A cached generic plan made while receipts was empty
	// (the first run on a new database) keeps scanning it whole as it grows:
	// measured at 10x slower for a 100-row claim. A plan_cache_mode in the
	// URL wins.
	if _, set := pc.ConnConfig.RuntimeParams["plan_cache_mode"]; !set {
		pc.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
	}
	// Every session commits with synchronous_commit on, whatever the
	// server, database or role default: with off, PostgreSQL acknowledges
	// a commit before its WAL is on disk, and a server crash then forgets
	// claims and send marks it had acknowledged, so the next run sends
	// those digests again. A startup parameter outranks the server's, the
	// database's and the role's settings and the URL's options=-c. A
	// stronger value named in the URL (remote_apply) is kept.
	if v := pc.ConnConfig.RuntimeParams["synchronous_commit"]; v == "" || !durableCommit(v) {
		pc.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	}
	return pc, nil
}

// NewPool connects to databaseURL with PoolConfig's settings and checks
// the connection. The caller owns the pool: it gives it to New, and to
// any other reader of the database, and closes it last.
func NewPool(ctx context.Context, databaseURL string) (_ *pgxpool.Pool, err error) {
	defer classify(&err)
	pc, err := PoolConfig(databaseURL)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	return pool, nil
}
