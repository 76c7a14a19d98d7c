package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// maxCachedStatements bounds stmtCache. The statements are the fixed
// texts of sql/*.sql (lists travel as one JSON argument), so the bound is
// never reached; it guards against a statement built at run time.
const maxCachedStatements = 64

// stmtCache keeps prepared statements by query text: parsing SQL was a
// third of a batched claim's CPU time. A query first seen inside a
// transaction is prepared after it, once the store's only connection is
// free again (preparing on the database inside would wait for itself).
type stmtCache struct {
	mu     sync.Mutex
	stmts  map[string]*sql.Stmt
	wanted map[string]bool
}

func newStmtCache() *stmtCache {
	return &stmtCache{stmts: map[string]*sql.Stmt{}, wanted: map[string]bool{}}
}

// lookup returns q's prepared statement, or nil after noting q as wanted.
func (c *stmtCache) lookup(q string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stmts[q]
	if st == nil && len(c.stmts)+len(c.wanted) < maxCachedStatements {
		c.wanted[q] = true
	}
	return st
}

// prepareWanted prepares the queries noted since the last call. A query
// that fails to prepare (a table not migrated yet) is simply not cached.
//
// The mutex is never held while preparing: PrepareContext waits for the
// store's only connection, which a concurrent transaction may hold while
// it waits in lookup for the mutex.
func (c *stmtCache) prepareWanted(ctx context.Context, db *sql.DB) {
	c.mu.Lock()
	var qs []string
	for q := range c.wanted {
		delete(c.wanted, q)
		qs = append(qs, q)
	}
	c.mu.Unlock()
	for _, q := range qs {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		c.mu.Lock()
		if old := c.stmts[q]; old != nil {
			st.Close() // prepared twice by racing transactions
		} else {
			c.stmts[q] = st
		}
		c.mu.Unlock()
	}
}

func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for q, st := range c.stmts {
		errs = append(errs, st.Close())
		delete(c.stmts, q)
	}
	return errors.Join(errs...)
}

// sqliteTx is a write transaction whose queries use the statement cache.
type sqliteTx struct {
	*sql.Tx
	cache *stmtCache
}

// ExecContext runs q through its cached statement when there is one.
func (t sqliteTx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if st := t.cache.lookup(q); st != nil {
		return t.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, q, args...)
}

// QueryContext runs q through its cached statement when there is one.
func (t sqliteTx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := t.cache.lookup(q); st != nil {
		return t.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, q, args...)
}

// QueryRowContext runs q through its cached statement when there is one.
func (t sqliteTx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if st := t.cache.lookup(q); st != nil {
		return t.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, q, args...)
}
