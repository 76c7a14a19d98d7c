// Package pgtest gives each test its own PostgreSQL schema, so tests run in
// parallel against one server and leave nothing behind.
//
// The server is DIGEST_TEST_DATABASE_URL, by default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable. A test never
// skips when the server is down: it fails and says how to start it. Under
// go test -short (make check, the edit loop with no services) every test
// that needs the server skips instead; make test never passes -short.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultURL is the server used when DIGEST_TEST_DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// EnvURL names the environment variable that overrides DefaultURL.
const EnvURL = "DIGEST_TEST_DATABASE_URL"

// BaseURL returns the test server's connection string.
func BaseURL() string {
	if u := os.Getenv(EnvURL); u != "" {
		return u
	}
	return DefaultURL
}

// Schema creates a fresh, uniquely named schema and returns a connection
// string whose search_path is that schema, so unqualified names (tables,
// sequences, goose's version table) live in it. The schema is dropped with
// everything in it when the test ends; close pools opened on it in an
// earlier-registered t.Cleanup or before returning (Cleanup runs last in,
// first out, so pools opened after Schema is called are closed first when
// they register their own Cleanup).
func Schema(t testing.TB) string {
	t.Helper()
	return SchemaOn(t, BaseURL())
}

// SchemaOn is Schema on the server at base rather than the test server
// (a private cluster a test starts, crashes and restarts itself). The
// server must still be up when the test's cleanups drop the schema.
func SchemaOn(t testing.TB, base string) string {
	t.Helper()
	SkipShort(t)
	name := "pgtest_" + randomHex(t, 8)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn := connect(ctx, t, base)
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("pgtest: create schema %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn := connect(ctx, t, base)
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+name+" CASCADE"); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", name, err)
		}
	})
	return withSearchPath(t, base, name)
}

// SkipShort skips t under go test -short: make check's unit run, which
// starts no PostgreSQL, Mailpit or browser. Tests that need a server call
// it through Schema; a test that starts its own cluster calls it itself.
func SkipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs PostgreSQL: skipped under -short (make check); make test runs it")
	}
}

func connect(ctx context.Context, t testing.TB, connString string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		t.Fatalf("pgtest: PostgreSQL is unreachable at %s (%s overrides): %v\n"+
			"Start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start\n"+
			"or run ./scripts/test, which installs and starts it.", redact(connString), EnvURL, err)
	}
	return conn
}

// withSearchPath adds search_path to a URL or keyword/value connection
// string; pgx sends unknown parameters to the server as run-time settings.
func withSearchPath(t testing.TB, connString, schema string) string {
	t.Helper()
	if !strings.HasPrefix(connString, "postgres://") && !strings.HasPrefix(connString, "postgresql://") {
		return connString + " search_path=" + schema
	}
	u, err := url.Parse(connString)
	if err != nil {
		t.Fatalf("pgtest: parse %s: %v", EnvURL, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func redact(connString string) string {
	u, err := url.Parse(connString)
	if err != nil || u.User == nil {
		return connString
	}
	return u.Redacted()
}

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("pgtest: random schema name: %v", err)
	}
	return hex.EncodeToString(b)
}
