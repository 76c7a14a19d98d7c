package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger/sqlite"
	"github.com/weeklydigest/digest/snapshot"
	"github.com/weeklydigest/digest/weekstatus"
)

// statusWorld is one week run with the real binary's commands in-process
// against an embedded ledger and a snapshot file that the test changes
// between runs (a customer unsubscribes, another is back).
type statusWorld struct {
	t       *testing.T
	dir     string
	vars    map[string]string
	now     time.Time // zero: the machine's clock
	records []digest.Record
	snap    string
	rng     *rand.Rand
	log     []string
}

var isoWeek48 = digest.ISOWeek{Year: 2026, Week: 48}

func newStatusWorld(t *testing.T, seed uint64, customers int) *statusWorld {
	dir := t.TempDir()
	w := &statusWorld{t: t, dir: dir, rng: rand.New(rand.NewPCG(seed, 7)), snap: filepath.Join(dir, "week.jsonl"),
		vars: map[string]string{"DIGEST_HMAC_KEYS": testKeys, "DIGEST_LEDGER_PATH": filepath.Join(dir, "digest.db"),
			"DIGEST_OUTBOX_DIR": filepath.Join(dir, "outbox"), "DIGEST_LOG_LEVEL": "error", "DIGEST_REPLAY_HORIZON": "14d"}}
	for r := range snapshot.Synthetic(customers, isoWeek48, seed) {
		switch w.rng.IntN(10) {
		case 0:
			r.Customer.Suppressed = true
		case 1:
			r.Activity = nil
		}
		w.records = append(w.records, r)
	}
	w.write()
	return w
}

func (w *statusWorld) write() {
	w.t.Helper()
	f, err := os.Create(w.snap)
	if err != nil {
		w.t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := snapshot.WriteJSONL(&buf, slices.Values(w.records)); err != nil {
		w.t.Fatal(err)
	}
	// WriteJSONL leaves out unsubscribed_at: an unsubscribed customer's
	// line gets it here.
	b := bufio.NewWriter(f)
	for i, line := range bytes.SplitAfter(buf.Bytes(), []byte("\n")) {
		if i < len(w.records) && w.records[i].Customer.Suppressed {
			line = append([]byte(`{"unsubscribed_at":"2026-11-20T00:00:00Z",`), line[1:]...)
		}
		b.Write(line)
	}
	if err := b.Flush(); err != nil {
		w.t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		w.t.Fatal(err)
	}
}

// digest runs one command, returning its exit code and stdout.
func (w *statusWorld) digest(args ...string) (int, string) {
	w.t.Helper()
	var out, errb bytes.Buffer
	env := &Env{Getenv: func(k string) string { return w.vars[k] }, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb}
	if now, start := w.now, time.Now(); !now.IsZero() {
		env.Now = func() time.Time { return now.Add(time.Since(start)) }
	}
	code := Main(context.Background(), args, env)
	if code == ExitUsage || code == ExitFailure {
		w.t.Fatalf("digest %v: exit %d\n%s%s\nsteps: %v", args, code, out.String(), errb.String(), w.log)
	}
	return code, out.String()
}

func (w *statusWorld) run(args ...string) {
	w.log = append(w.log, strings.Join(args, " "))
	w.digest(append([]string{"run", "--week", "2026-W48", "--snapshot", w.snap}, args...)...)
}

func (w *statusWorld) exec(q string, args ...any) {
	w.t.Helper()
	w.log = append(w.log, q)
	db, err := sql.Open("sqlite", w.vars["DIGEST_LEDGER_PATH"])
	if err != nil {
		w.t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(q, args...); err != nil {
		w.t.Fatal(err)
	}
}

// status returns status --json of the week (one shard if given), counted
// as the command counts it and with --customers, and fails unless they
// say the same: every count, the verdict, the exit code. It returns where
// the first counted from.
func (w *statusWorld) status(shard string) string {
	from, _ := w.statusJSON(shard)
	return from
}

// statusJSON is status, also returning the JSON.
func (w *statusWorld) statusJSON(shard string) (string, map[string]any) {
	w.t.Helper()
	args := []string{"status", "--week", "2026-W48", "--snapshot", w.snap, "--json"}
	if shard != "" {
		args = append(args, "--shard", shard)
	}
	codeFast, fast := w.digest(args...)
	codeFull, full := w.digest(append(args, "--customers")...)
	var a, b map[string]any
	if err := json.Unmarshal([]byte(fast), &a); err != nil {
		w.t.Fatalf("status: %v\n%s", err, fast)
	}
	if err := json.Unmarshal([]byte(full), &b); err != nil {
		w.t.Fatalf("status --customers: %v\n%s", err, full)
	}
	from := fmt.Sprint(a["counted_from"])
	if r, ok := a["source_reason"]; ok {
		from += ": " + fmt.Sprint(r)
	}
	if b["counted_from"] != "source" {
		w.t.Fatalf("status --customers counted from %v", b["counted_from"])
	}
	// The retention's ages move between the two commands.
	for _, k := range []string{"counted_from", "source_reason", "retention"} {
		delete(a, k)
		delete(b, k)
	}
	if codeFast != codeFull || !reflect.DeepEqual(a, b) {
		w.t.Fatalf("shard %q: status (%s) exit %d:\n%s\nstatus --customers exit %d:\n%s\nsteps: %v", shard, from, codeFast, fast, codeFull, full, w.log)
	}
	return from, b
}

// subscribedReceipt picks, by the world's random source, the key of a
// receipt of the week whose customer is not unsubscribed.
func (w *statusWorld) subscribedReceipt() (string, bool) {
	w.t.Helper()
	kr, err := digest.ParseKeyring(testKeys)
	if err != nil {
		w.t.Fatal(err)
	}
	subscribed := map[string]bool{}
	for _, r := range w.records {
		if !r.Customer.Suppressed {
			for _, k := range kr.Candidates(digest.Identity{Customer: r.Customer.ID, Week: isoWeek48, Type: "weekly_activity", Version: "v1"}) {
				subscribed[string(k)] = true
			}
		}
	}
	db, err := sql.Open("sqlite", w.vars["DIGEST_LEDGER_PATH"])
	if err != nil {
		w.t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT key FROM receipts ORDER BY key`)
	if err != nil {
		w.t.Fatal(err)
	}
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			w.t.Fatal(err)
		}
		if subscribed[k] {
			keys = append(keys, k)
		}
	}
	if err := rows.Err(); err != nil {
		w.t.Fatal(err)
	}
	if len(keys) == 0 {
		return "", false
	}
	return keys[w.rng.IntN(len(keys))], true
}

// unsubscribe flips the suppression of n random customers: one sent to
// before unsubscribing keeps a receipt no run sends (a ghost).
func (w *statusWorld) unsubscribe(n int) {
	for range n {
		i := w.rng.IntN(len(w.records))
		w.records[i].Customer.Suppressed = !w.records[i].Customer.Suppressed
	}
	w.log = append(w.log, fmt.Sprintf("flip %d suppressions", n))
	w.write()
}

// The fast status (the runs' recorded reads against the ledger's counts)
// and the full reconciliation (every customer read and matched by key)
// agree on random weeks built with the real commands: runs of the whole
// week and of shards, cohort and observe runs, customers who unsubscribe
// after their digest went, held and quarantined receipts, a failed
// receipt, a partial cutoff and its repin, and a pruned week. A verdict
// of complete is never reached with a customer unaccounted for: the full
// reconciliation is the reference, and they agree.
func TestFastStatusAgreesWithTheFullReconciliation(t *testing.T) {
	t.Parallel()
	fastHits := 0
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			w := newStatusWorld(t, seed+1, 30+int(seed)*7)
			check := func() {
				from := w.status("")
				if strings.HasPrefix(from, "ledger") {
					fastHits++
				}
				n := 2 + w.rng.IntN(2)
				w.status(fmt.Sprintf("%d/%d", w.rng.IntN(n), n))
			}
			if seed == 3 {
				// A partial cutoff, run on Thursday; then repinned.
				w.now = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
				w.run("--early-cutoff")
				check()
				w.now = time.Time{} // the machine's clock, past the week's cutoff
				w.log = append(w.log, "repin")
				w.digest("repin", "--week", "2026-W48", "--reason", "test")
				check()
			}
			check() // not run yet
			steps := []func(){
				func() { w.run("--mode", "observe") },
				func() { w.run("--cohort", fmt.Sprint(10+w.rng.IntN(60))) },
				func() { w.run() },
				func() {
					n := 2 + w.rng.IntN(3)
					for i := range n {
						if w.rng.IntN(4) > 0 {
							w.run("--shard", fmt.Sprintf("%d/%d", i, n))
						}
					}
				},
				func() {
					// The source changes: the fast count is the source as
					// the newest runs read it, so a run reads it first.
					w.unsubscribe(1 + w.rng.IntN(3))
					switch w.rng.IntN(3) {
					case 0:
						w.run()
					case 1:
						w.run("--shard", "0/2")
					default:
						w.run("--mode", "observe")
					}
				},
				func() {
					// A receipt of a customer runs still send: no command
					// moves a ghost's receipt (sent before its customer
					// unsubscribed) out of its terminal state, and the
					// fast count relies on it (terminal, in weekstatus/fast.go).
					key, ok := w.subscribedReceipt()
					if !ok {
						return
					}
					state := []string{"held", "quarantined", "failed"}[w.rng.IntN(3)]
					w.exec(`UPDATE receipts SET previous_state = state, state = ? WHERE key = ?`, state, key)
				},
			}
			for range 9 {
				steps[w.rng.IntN(len(steps))]()
				check()
			}
			w.run()
			check()
			if seed == 2 {
				ageLedger(t, w.vars["DIGEST_LEDGER_PATH"], 40*24*time.Hour)
				w.log = append(w.log, "prune")
				w.digest("prune", "--older-than", "15d")
				check()
			}
		})
	}
	if fastHits < 4 {
		t.Fatalf("status counted from the ledger %d times: the comparison proves little", fastHits)
	}
	t.Logf("status counted from the ledger %d times", fastHits)
}

// After a plain run of the whole week, and after a run of every shard,
// status counts from the ledger, for the week and for one shard; after a
// repin or with another keyring it reads the source, and says why.
func TestStatusCountsFromTheLedgerAfterARun(t *testing.T) {
	t.Parallel()
	w := newStatusWorld(t, 42, 40)
	w.run()
	if from := w.status(""); !strings.HasPrefix(from, "ledger") {
		t.Fatalf("after a run of the whole week: counted from %s", from)
	}
	for i := range 3 {
		w.run("--shard", fmt.Sprintf("%d/3", i))
	}
	if from := w.status("1/3"); !strings.HasPrefix(from, "ledger") {
		t.Fatalf("one shard after a run of every shard: counted from %s", from)
	}
	// Customers sent to unsubscribe: their receipts stay, sent, and are
	// no Send customer's (ghosts, in a terminal state).
	for i := range w.records {
		if !w.records[i].Customer.Suppressed && len(w.records[i].Activity) > 0 && i%5 == 0 {
			w.records[i].Customer.Suppressed = true
		}
	}
	w.write()
	w.run()
	from, st := w.statusJSON("")
	if !strings.HasPrefix(from, "ledger") {
		t.Fatalf("after an unsubscribe and a run: counted from %s", from)
	}
	sent := st["customers"].(map[string]any)["sent"].(float64)
	if receipts := st["receipts"].(map[string]any)["sent"].(float64); receipts <= sent || st["verdict"] != "complete" {
		t.Fatalf("after unsubscribes: %v sent receipts, %v customers sent, verdict %v: want receipts of the unsubscribed beyond the customers sent, complete", receipts, sent, st["verdict"])
	}
	// Another keyring without the pinned key: the source.
	w.vars["DIGEST_HMAC_KEYS"] = "k2:AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="
	if from := w.status(""); !strings.Contains(from, "keyring") {
		t.Fatalf("with another keyring: counted from %s", from)
	}
}

// failingSource fails every read: what weekstatus.Compute must not need after
// the runs recorded their reads.
type failingSource struct{}

func (failingSource) Records(context.Context, digest.SourceQuery) iter.Seq2[digest.Record, error] {
	return func(yield func(digest.Record, error) bool) { yield(digest.Record{}, errors.New("the source was read")) }
}

// The week state each run pushes (pushWeekOf: weekstatus.Compute of the whole
// week, q.Full unset) counts from the ledger once the runs recorded their
// reads: it does not read the source.
func TestWeekStatePushCountsFromTheLedger(t *testing.T) {
	t.Parallel()
	w := newStatusWorld(t, 7, 30)
	for i := range 2 {
		w.run("--shard", fmt.Sprintf("%d/2", i))
	}
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Config{Path: w.vars["DIGEST_LEDGER_PATH"]})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	keys, err := digest.ParseKeyring(testKeys)
	if err != nil {
		t.Fatal(err)
	}
	q := weekstatus.Query{Spec: digest.Spec{Week: isoWeek48, Location: time.UTC, Type: "weekly_activity", Version: "v1"},
		Settle: 4 * time.Hour, Keys: keys, Now: time.Now()}
	ws, _, _, err := weekstatus.Compute(ctx, store, failingSource{}, q)
	if err != nil || ws.CountedFrom != weekstatus.CountedFromLedger || ws.Verdict != verdictComplete {
		t.Fatalf("the week's status after its runs: %+v, %v; want complete, counted from the ledger without the source", ws, err)
	}
	q.Full = true
	if _, _, _, err := weekstatus.Compute(ctx, store, failingSource{}, q); err == nil {
		t.Fatal("--customers did not read the source")
	}
}

// Issue 35: when status reads the source, its "counted from" line says
// in one sentence what it counted and what to do: here, after a run of
// one shard of a new shard layout, run the missing shards.
func TestStatusSaysWhatItCountedAndWhatToDo(t *testing.T) {
	t.Parallel()
	w := newStatusWorld(t, 43, 30)
	for i := range 3 {
		w.run("--shard", fmt.Sprintf("%d/3", i))
	}
	w.run("--shard", "0/2")
	_, out := w.digest("status", "--week", "2026-W48", "--snapshot", w.snap)
	line := lineOf(out, "counted from")
	for _, want := range []string{"source, every customer looked up, as ", "run them, or the whole week once"} {
		if !strings.Contains(line, want) {
			t.Errorf("status's counted from line does not say %q:\n%s", want, line)
		}
	}
	if strings.Count(line, ". ") > 0 || len(line) > 160 {
		t.Errorf("status's counted from line is not one short sentence:\n%s", line)
	}
	w.run()
	_, out = w.digest("status", "--week", "2026-W48", "--snapshot", w.snap)
	if line := lineOf(out, "counted from"); !strings.Contains(line, "ledger: the runs' recorded reads of the source against the receipts") {
		t.Errorf("after a run of the whole week: %s", line)
	}
}
