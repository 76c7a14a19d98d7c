package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// binaryWeek is a week seeded by "digest seed" in a schema of its own and
// run by the digest binary as the user runs it: the set-up MeasureUser
// and MeasureCapacity share.
type binaryWeek struct {
	*workSchema
	bin string
	env []string // the environment of every digest command
	// seedTime is how long "digest seed" took; zero when the schema's
	// customers were reused.
	seedTime time.Duration
}

// openBinaryWeek opens the schema (see openSchema), migrates it with
// "digest migrate" and seeds it with "digest seed" unless it already holds
// exactly customers customers. Every digest command it makes runs with a
// random HMAC key, a rate limit far above reach and concurrency parallel
// sends.
func openBinaryWeek(ctx context.Context, databaseURL, schema, bin string, customers, concurrency int,
	week digest.ISOWeek, progress func(string, ...any)) (_ *binaryWeek, err error) {
	ws, err := openSchema(ctx, databaseURL, schema)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			ws.close(ctx)
		}
	}()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	w := &binaryWeek{workSchema: ws, bin: bin, env: append(os.Environ(),
		"DIGEST_HMAC_KEYS=bench:"+base64.StdEncoding.EncodeToString(key),
		"DIGEST_RATE=1000000", "DIGEST_BURST=1000", // far above reach: the limiter costs, never waits
		"DIGEST_CONCURRENCY="+strconv.Itoa(concurrency),
		"DIGEST_LOG_LEVEL=info",
	)}
	withDB := []string{"DIGEST_DATABASE_URL=" + ws.url}
	if out, err := w.command(ctx, withDB, "migrate").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("bench: digest migrate: %v\n%s", err, out)
	}
	var have int64
	if err := ws.admin.QueryRow(ctx, "SELECT count(*) FROM "+ws.name+".digest_customers").Scan(&have); err != nil {
		have = -1
	}
	if have == int64(customers) {
		progress("reusing %d seeded customers", have)
		return w, nil
	}
	if have > 0 {
		if _, err := ws.admin.Exec(ctx, "DROP TABLE "+ws.name+".digest_customers, "+ws.name+".digest_activity"); err != nil {
			return nil, fmt.Errorf("bench: drop old source tables: %w", err)
		}
	}
	progress("digest seed --customers %d --week %s", customers, week)
	t0 := time.Now()
	out, err := w.command(ctx, withDB, "seed", "--customers", strconv.Itoa(customers), "--week", week.String()).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("bench: digest seed: %v\n%s", err, out)
	}
	w.seedTime = time.Since(t0)
	return w, nil
}

// command is the digest binary with args, its environment the week's plus
// extra (later settings win).
func (w *binaryWeek) command(ctx context.Context, extra []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, w.bin, args...)
	cmd.Env = append(slices.Clone(w.env), extra...)
	return cmd
}

// emptyLedger truncates the ledger tables, so a run starts from nothing.
func (w *binaryWeek) emptyLedger(ctx context.Context) error {
	if _, err := w.admin.Exec(ctx, "SET search_path TO "+w.name+"; TRUNCATE "+ledgerTables); err != nil {
		return fmt.Errorf("bench: empty the ledger: %w", err)
	}
	return nil
}

// walLSN returns the server's current WAL position, for walSince.
func (w *binaryWeek) walLSN(ctx context.Context) (string, error) {
	var lsn string
	if err := w.admin.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
		return "", fmt.Errorf("bench: wal position: %w", err)
	}
	return lsn, nil
}
