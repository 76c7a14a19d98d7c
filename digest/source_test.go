package digest_test

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/weeklydigest/digest/digest"
)

// TestShardOfKnownValues pins the hash to the value PostgreSQL computes, so
// SQL and Go shard alike. Expected buckets from coreutils:
//
//	h=$(printf '%s' customer_8421 | md5sum | cut -c1-8); echo $((16#$h % 7))
func TestShardOfKnownValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id         string
		n, want    int
		wantCohort int // bucket of "cohort|"+id, mod 100
	}{
		{"customer_8421", 7, 1, 21},
		{"customer_8421", 16, 9, 21},
		{"cust_0001", 7, 2, 43},
		{"cust_0001", 16, 11, 43},
		{"山田", 7, 0, 55},
		{"山田", 16, 9, 55},
	}
	for _, tt := range tests {
		if got := digest.ShardOf(tt.id, tt.n); got != tt.want {
			t.Errorf("ShardOf(%q, %d) = %d, want %d", tt.id, tt.n, got, tt.want)
		}
		if digest.InCohort(tt.id, tt.wantCohort) || !digest.InCohort(tt.id, tt.wantCohort+1) {
			t.Errorf("InCohort(%q): bucket is not %d", tt.id, tt.wantCohort)
		}
	}
}

func TestShard(t *testing.T) {
	t.Parallel()
	for _, s := range []digest.Shard{{}, {Index: 0, Count: 1}} {
		if !s.All() || !s.Has("anyone") || s.String() != "all" {
			t.Errorf("%+v should select everyone", s)
		}
	}
	// Each customer is in exactly one of n shards, and shards are not empty.
	const n = 5
	sizes := make([]int, n)
	for i := range 1000 {
		id := fmt.Sprintf("customer_%d", i)
		in := 0
		for k := range n {
			if (digest.Shard{Index: k, Count: n}).Has(id) {
				in++
				sizes[k]++
			}
		}
		if in != 1 {
			t.Fatalf("%s is in %d shards", id, in)
		}
	}
	for k, size := range sizes {
		if size < 150 || size > 250 {
			t.Errorf("shard %d/%d has %d of 1000 customers", k, n, size)
		}
	}
	if got := (digest.Shard{Index: 2, Count: 5}).String(); got != "2/5" {
		t.Errorf("String = %q", got)
	}
}

func TestInCohortBounds(t *testing.T) {
	t.Parallel()
	in := 0
	for i := range 1000 {
		id := fmt.Sprintf("customer_%d", i)
		if digest.InCohort(id, 0) || !digest.InCohort(id, 100) {
			t.Fatalf("%s: 0%% must select none and 100%% all", id)
		}
		if digest.InCohort(id, 30) {
			in++
			if !digest.InCohort(id, 31) {
				t.Fatalf("%s: cohorts must grow monotonically", id)
			}
		}
	}
	if in < 240 || in > 360 {
		t.Errorf("30%% cohort holds %d of 1000", in)
	}
}

func TestBadRecordError(t *testing.T) {
	t.Parallel()
	e := &digest.BadRecordError{Where: "snapshot.jsonl:17", Field: "email", Err: io.ErrUnexpectedEOF}
	if got := e.Error(); got != "snapshot.jsonl:17: email: unexpected EOF" {
		t.Errorf("Error = %q", got)
	}
	if !errors.Is(e, io.ErrUnexpectedEOF) {
		t.Error("Unwrap")
	}
	e.Field = ""
	if got := e.Error(); got != "snapshot.jsonl:17: unexpected EOF" {
		t.Errorf("Error = %q", got)
	}
}
