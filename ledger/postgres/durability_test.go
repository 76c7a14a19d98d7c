package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weeklydigest/digest/internal/pgtest"
	"github.com/weeklydigest/digest/ledger/postgres"
)

// withParam returns connString with the query parameter k=v.
func withParam(t *testing.T, connString, k, v string) string {
	t.Helper()
	u, err := url.Parse(connString)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(k, v)
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgx reads + as itself
	return u.String()
}

// showOn returns SHOW name on one of pool's connections.
func showOn(t *testing.T, pool *pgxpool.Pool, name string) string {
	t.Helper()
	var v string
	if err := pool.QueryRow(context.Background(), "SHOW "+name).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// A role whose sessions default to synchronous_commit = off (ALTER ROLE,
// as a tuning of the database could leave it), or a URL that asks for off,
// still commits the ledger's receipts with on: the job sets it on every
// session, and the durability check reports it.
func TestSessionsCommitSynchronouslyWhateverTheDefault(t *testing.T) {
	pgtest.SkipShort(t)
	t.Parallel()
	ctx := context.Background()
	base := pgtest.BaseURL()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	role := "digest_async_" + hex.EncodeToString(b)
	for _, q := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"ALTER ROLE " + role + " SET synchronous_commit = off",
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), base)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), "DROP ROLE "+role); err != nil {
			t.Errorf("drop role: %v", err)
		}
	})
	schemaURL := pgtest.Schema(t) // dropped before the role (cleanups run last in, first out)
	schema, _ := url.Parse(schemaURL)
	if _, err := admin.Exec(ctx, "GRANT USAGE, CREATE ON SCHEMA "+schema.Query().Get("search_path")+" TO "+role); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(schemaURL)
	u.User = url.User(role)
	roleURL := u.String()

	// The role's own sessions do default to off.
	c, err := pgx.Connect(ctx, roleURL)
	if err != nil {
		t.Fatal(err)
	}
	var def string
	if err := c.QueryRow(ctx, "SHOW synchronous_commit").Scan(&def); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
	if def != "off" {
		t.Fatalf("the role's default synchronous_commit is %q, want off: the test proves nothing", def)
	}

	for _, tc := range []struct{ name, url, want string }{
		{"role default off", roleURL, "on"},
		{"options -c in the URL", withParam(t, roleURL, "options", "-c synchronous_commit=off"), "on"},
		{"parameter in the URL", withParam(t, roleURL, "synchronous_commit", "off"), "on"},
		{"a stronger value is kept", withParam(t, roleURL, "synchronous_commit", "remote_apply"), "remote_apply"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, pool := postgres.OpenTest(t, tc.url, postgres.Config{})
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			if got := showOn(t, pool, "synchronous_commit"); got != tc.want {
				t.Fatalf("SHOW synchronous_commit on the store's connection = %q, want %q", got, tc.want)
			}
			ss, err := s.Durability(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := ss.Err(); err != nil {
				t.Fatalf("durability: %v", err)
			}
			if want := "fsync=on full_page_writes=on synchronous_commit=" + tc.want; ss.String() != want {
				t.Fatalf("settings %q, want %q", ss.String(), want)
			}
		})
	}
}
