package postgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// OpenTest returns a store on a pool of its own on databaseURL (NewPool's
// settings), and the pool, which is closed when t ends.
func OpenTest(t testing.TB, databaseURL string, cfg Config) (*Store, *pgxpool.Pool) {
	t.Helper()
	pool, err := NewPool(context.Background(), databaseURL)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(pool.Close)
	return New(pool, cfg), pool
}
