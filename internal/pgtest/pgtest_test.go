package pgtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/weeklydigest/digest/internal/pgtest"
)

func TestSchemaIsolated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var schemas [2]string
	for i := range schemas {
		conn, err := pgx.Connect(ctx, pgtest.Schema(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(ctx) })
		if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schemas[i]); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "CREATE TABLE t (x int)"); err != nil {
			t.Fatalf("create table in schema %d: %v", i, err)
		}
	}
	if schemas[0] == schemas[1] || schemas[0] == "public" {
		t.Fatalf("schemas not fresh: %v", schemas)
	}
}
