package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/pgtest"
)

// "digest prune" on a machine whose clock runs ten years ahead: the
// cutoff is the server's clock minus --older-than, so the week a run (on
// a machine with the right time) started seconds earlier keeps its sent
// receipt and gets no tombstone.
func TestPruneTrustsTheLedgersClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	vars := map[string]string{"DIGEST_DATABASE_URL": pgtest.Schema(t)}
	store := migratedStore(t, vars)
	week := digest.WeekOf(time.Now(), time.UTC)
	if _, err := store.StartWeek(ctx, digest.SnapshotPin{Type: "weekly_activity", Week: week, Version: "v1"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	key := digest.Key("k1:" + strings.Repeat("ef", 32))
	res, err := store.Claim(ctx, []digest.ClaimRequest{{Keys: []digest.Key{key}, Fingerprint: "fp", Week: week, RunID: "r1", Lease: time.Minute}})
	if err != nil || res[0].Outcome != digest.OutcomeClaimed {
		t.Fatalf("claim: %v %+v", err, res)
	}
	if errs, err := store.Finish(ctx, []digest.Finish{{Key: key, Token: res[0].Token, State: digest.StateSent, ProviderRef: "p", RunID: "r1", Week: week}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}

	var out, errb bytes.Buffer
	env := &Env{Getenv: func(k string) string { return vars[k] }, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb,
		Now: func() time.Time { return time.Now().Add(10 * 365 * 24 * time.Hour) }}
	if code := Main(ctx, []string{"prune", "--older-than", "90d"}, env); code != ExitOK || !strings.Contains(out.String(), "pruned 0 receipts") {
		t.Fatalf("prune on a clock ten years ahead: exit %d, want 0 pruning nothing\n%s%s", code, out.String(), errb.String())
	}
	if r, _, err := store.Show(ctx, key); err != nil || r.State != digest.StateSent {
		t.Fatalf("the sent receipt of the week under run: %+v, %v; want kept", r, err)
	}
	if stones, err := store.Tombstones(ctx, week); err != nil || len(stones) != 0 {
		t.Fatalf("tombstones %+v, %v; want none", stones, err)
	}
}
