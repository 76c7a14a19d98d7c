package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/smtp"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/e2etest"
	"github.com/weeklydigest/digest/internal/mailpittest"
	"github.com/weeklydigest/digest/internal/pgtest"
	"github.com/weeklydigest/digest/sender"
)

// BenchmarkVerify measures "digest verify" of one week of N sent receipts
// (DIGEST_VERIFY_BENCH_N, default 10,000) against Mailpit holding each
// digest once: the binary's wall time, provider calls and peak RSS. The
// receipts are written straight into the week's partition by SQL and the
// messages handed to Mailpit's SMTP over a few connections (header and a
// one-line body: verify reads tags only). docs/benchmarks.md, "digest verify".
//
//	DIGEST_VERIFY_BENCH_N=100000 go test -run '^$' -bench BenchmarkVerify -benchtime 1x ./e2e/
func BenchmarkVerify(b *testing.B) {
	n := 10_000
	if v := os.Getenv("DIGEST_VERIFY_BENCH_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("DIGEST_VERIFY_BENCH_N=%q: want a positive number", v)
		}
	}
	ctx := context.Background()
	url, mp := pgtest.Schema(b), mailpittest.Start(b)
	vars := []string{"DIGEST_DATABASE_URL=" + url, "DIGEST_LOOKUP_URL=mailpit+" + mp.APIURL(), "DIGEST_LOG_LEVEL=warn"}
	digestCmd := func(args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, e2etest.Binary(), args...)
		cmd.Env = append(os.Environ(), vars...)
		cmd.Dir = b.TempDir()
		return cmd
	}
	if out, err := digestCmd("migrate").CombinedOutput(); err != nil {
		b.Fatalf("migrate: %v\n%s", err, out)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	start := time.Now()
	if _, err := pool.Exec(ctx, `CREATE TABLE receipts_2026_w40 PARTITION OF receipts FOR VALUES IN ('2026-W40') WITH (fillfactor = 50)`); err != nil {
		b.Fatal(err)
	}
	_, err = pool.Exec(ctx, `INSERT INTO receipts (key, key_id, state, fingerprint, attempts, claim_token,
		first_claimed_at, last_attempt_at, sent_at, provider_ref, run_id, iso_week, updated_at)
		SELECT 'k1:' || lpad(to_hex(i), 64, '0'), 'k1', 'sent', 'fp', 1, i, now(), now(), now(), 'ref', 'bench', '2026-W40', now()
		FROM generate_series(1, $1) AS i`, n)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE receipts`); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d receipts written in %v", n, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	deliverKeys(b, mp.SMTPAddr(), n, 8)
	b.Logf("%d messages delivered to Mailpit in %v", n, time.Since(start).Round(time.Millisecond))

	b.ResetTimer()
	for range b.N {
		cmd := digestCmd("verify", "--week", "2026-W40", "--json", "--rate", "0")
		t0 := time.Now()
		out, err := cmd.Output()
		wall := time.Since(t0)
		if err != nil {
			b.Fatalf("verify: %v\n%s", err, out)
		}
		var rep struct {
			Checked, FoundOnce, Listed, ProviderCalls int64
		}
		var raw map[string]any
		if err := json.Unmarshal(out, &raw); err != nil {
			b.Fatal(err)
		}
		rep.Checked, rep.FoundOnce = int64(raw["checked"].(float64)), int64(raw["found_once"].(float64))
		rep.Listed, rep.ProviderCalls = int64(raw["listed"].(float64)), int64(raw["provider_calls"].(float64))
		if rep.Checked != int64(n) || rep.FoundOnce != int64(n) || rep.Listed != int64(n) {
			b.Fatalf("verify of %d: %s", n, out)
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		b.ReportMetric(wall.Seconds(), "s/verify")
		b.ReportMetric(float64(n)/wall.Seconds(), "receipts/s")
		b.ReportMetric(float64(rep.ProviderCalls), "provider-calls")
		b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MB")
		b.ReportMetric(time.Duration(ru.Utime.Nano()+ru.Stime.Nano()).Seconds(), "cpu-s")
	}
}

// deliverKeys hands Mailpit n minimal messages tagged like digests of the
// keys k1:<hex of 1..n>, over conns SMTP connections.
func deliverKeys(b *testing.B, addr string, n, conns int) {
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := smtp.Dial(addr)
			if err != nil {
				errs <- err
				return
			}
			defer cl.Quit()
			for i := 1 + c; i <= n; i += conns {
				key := digest.Key(fmt.Sprintf("k1:%064x", i))
				if err := cl.Mail("digest@bank.example"); err != nil {
					errs <- err
					return
				}
				if err := cl.Rcpt("someone@example.com"); err != nil {
					errs <- err
					return
				}
				w, err := cl.Data()
				if err != nil {
					errs <- err
					return
				}
				fmt.Fprintf(w, "Subject: digest\r\n%s: %s\r\n%s: %s\r\n\r\nbody\r\n", sender.HeaderKey, key, sender.HeaderMailpitTags, sender.MailpitTag(key))
				if err := w.Close(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}
