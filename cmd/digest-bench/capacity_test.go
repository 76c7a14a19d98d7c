package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/internal/bench"
	"github.com/weeklydigest/digest/internal/e2etest"
	"github.com/weeklydigest/digest/internal/pgtest"
)

// A CI-sized "digest-bench capacity": two shard processes of the real
// binary at once against the null server process. It checks what load
// cannot move: every digest of the week sent exactly once (the shards'
// summaries, the null server's count and the ledger agree with the
// week's wanted digests), no shard lost, status complete for the week
// and for a shard, and prune taking the whole week; never how fast.
func TestCapacitySmall(t *testing.T) {
	t.Parallel()
	const customers = 2000
	code, out, errOut := benchMain(t, map[string]string{"DIGEST_DATABASE_URL": pgtest.BaseURL()},
		"capacity", "--digest-bin", e2etest.Binary(), "--customers", fmt.Sprint(customers), "--shards", "2", "--concurrency", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	var res bench.CapacityResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	want := len(e2etest.Wanted(t, customers, bench.DefaultWeek))
	if len(res.Runs) != 2 {
		t.Fatalf("%d shard runs, want 2:\n%s", len(res.Runs), out)
	}
	sent := 0
	for i, r := range res.Runs {
		if r.Shard != fmt.Sprintf("%d/2", i) || r.ExitCode != 0 || r.Sent == 0 {
			t.Errorf("shard run %d: %+v; want shard %d/2 exiting 0 having sent some", i, r, i)
		}
		if !(r.ProcessCPU > 0 && r.PostgresCPU > 0 && r.Backends > 0 && r.PeakRSS > 1 && r.PeakRSS < 1024) {
			t.Errorf("shard %s: CPU %.0f µs process, %.0f µs PostgreSQL over %d backends, peak RSS %.1f MiB; want all measured",
				r.Shard, r.ProcessCPU, r.PostgresCPU, r.Backends, r.PeakRSS)
		}
		sent += r.Sent
	}
	if sent != want || res.Sent != want || res.Received != int64(want) || res.Receipts["sent"] != int64(want) || len(res.Receipts) != 1 {
		t.Errorf("the shards sent %d (total %d), the null server received %d, receipts by state %v; want %d each, every receipt sent",
			sent, res.Sent, res.Received, res.Receipts, want)
	}
	if !(res.ServerCPU > 0 && res.WALBytes > 0 && res.Cores > 0 && res.PerSecond > 0) {
		t.Errorf("server CPU %.0f µs, WAL %.0f B/digest, %.2f cores, %.0f digests/s; want all positive", res.ServerCPU, res.WALBytes, res.Cores, res.PerSecond)
	}
	for _, st := range []bench.Timed{res.Status, res.StatusShard} {
		if st.ExitCode != 0 || st.Outcome != "complete" || st.Seconds <= 0 || st.CountedFrom == "" || st.PeakRSS <= 1 {
			t.Errorf("%s: exit %d, %q counted from %q after %.3fs, peak RSS %.1f MiB; want exit 0, complete, and how it counted",
				st.Command, st.ExitCode, st.Outcome, st.CountedFrom, st.Seconds, st.PeakRSS)
		}
	}
	if !strings.Contains(res.StatusShard.Command, "--shard 0/2") {
		t.Errorf("the shard's status ran %q; want --shard 0/2", res.StatusShard.Command)
	}
	if wantPrune := fmt.Sprintf("pruned %d receipts older than 90d, the partition dropped whole", want); res.Prune.ExitCode != 0 || res.Prune.Outcome != wantPrune {
		t.Errorf("prune: exit %d, %q; want exit 0, %q", res.Prune.ExitCode, res.Prune.Outcome, wantPrune)
	}
	rows := map[string]int64{}
	for _, tb := range res.Tables {
		rows[tb.Name] = tb.Rows
		if tb.Bytes <= 0 {
			t.Errorf("table %s: %d bytes; want its size", tb.Name, tb.Bytes)
		}
	}
	if rows["receipts_2026_w48"] != int64(want) || rows["digest_customers"] != customers {
		t.Errorf("tables %v; want receipts_2026_w48 holding %d and digest_customers %d", rows, want, customers)
	}
}

// Every refusal is a usage error (exit 2) before anything is seeded or
// built; a zero is refused on the command line, where it cannot mean
// "the default".
func TestCapacityUsageErrors(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DIGEST_DATABASE_URL": "postgres://nowhere.invalid/x"}
	for _, args := range [][]string{{"--nope"}, {"extra"}, {"--shards", "0"}, {"--shards", "65"}, {"--concurrency", "0"},
		{"--concurrency", "257"}, {"--customers", "0"}, {"--schema", "Bad-name"}, {"--schema", "1st"}, {"--digest-bin", "/nonexistent/digest"}} {
		code, out, errOut := benchMain(t, env, append([]string{"capacity"}, args...)...)
		if code != 2 || !strings.HasPrefix(errOut, "digest-bench: ") || strings.Count(errOut, "\n") != 1 || out != "" {
			t.Errorf("capacity %v: exit %d, stdout %q, stderr %q; want exit 2 with one line", args, code, out, errOut)
		}
	}
	if code, _, errOut := benchMain(t, nil, "capacity"); code != 2 || !strings.Contains(errOut, "DIGEST_DATABASE_URL") {
		t.Errorf("capacity without a database: exit %d, %q; want exit 2 naming DIGEST_DATABASE_URL", code, errOut)
	}
	code, out, _ := benchMain(t, nil, "capacity", "--help")
	for _, f := range []string{"customers", "shards", "concurrency", "schema", "json", "digest-bin", "database-url"} {
		if code != 0 || !strings.Contains(out, "\n  -"+f+" ") && !strings.Contains(out, "\n  -"+f+"\n") {
			t.Errorf("capacity --help (exit %d) lacks -%s:\n%s", code, f, out)
		}
	}
}

// A shard that fails fails the measurement (exit 1), but only after the
// rest is measured and printed: status and prune of the week it left are
// what an operator meets after such a failure.
func TestCapacityFailedShard(t *testing.T) {
	t.Parallel()
	// The "digest binary" fails shard 1/2's run and is the real one for
	// everything else.
	bin := filepath.Join(t.TempDir(), "digest")
	script := "#!/bin/sh\ncase \"$*\" in *'--shard 1/2'*) echo injected failure >&2; exit 1;; esac\nexec " + e2etest.Binary() + " \"$@\"\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := benchMain(t, map[string]string{"DIGEST_DATABASE_URL": pgtest.BaseURL()},
		"capacity", "--digest-bin", bin, "--customers", "300", "--shards", "2", "--concurrency", "1", "--json")
	if code != 1 || !strings.Contains(errOut, "shard 1/2 exited 1:\ninjected failure") {
		t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 naming shard 1/2 and its last lines", code, errOut)
	}
	var res bench.CapacityResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if len(res.Runs) != 2 || res.Runs[0].ExitCode != 0 || res.Runs[0].Sent == 0 || res.Runs[1].ExitCode != 1 || res.Runs[1].Sent != 0 {
		t.Fatalf("shard runs %+v; want 0/2 sent some, 1/2 exited 1 having sent none", res.Runs)
	}
	if res.Received != int64(res.Runs[0].Sent) || res.Receipts["sent"] != int64(res.Runs[0].Sent) {
		t.Errorf("the null server received %d, receipts %v; want shard 0/2's %d", res.Received, res.Receipts, res.Runs[0].Sent)
	}
	if res.Status.ExitCode != 3 || res.StatusShard.ExitCode != 0 || res.StatusShard.Outcome != "complete" {
		t.Errorf("status of the week: exit %d (%s), of shard 0/2: exit %d (%s); want 3 (shard 1/2's customers remain) and 0, complete",
			res.Status.ExitCode, res.Status.Outcome, res.StatusShard.ExitCode, res.StatusShard.Outcome)
	}
	if res.Prune.ExitCode != 0 || res.Prune.Command == "" {
		t.Errorf("prune: %+v; want it run", res.Prune)
	}
}
