package weekstatus

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// pagedStates is a ledger whose WeekStates takes a while per call, or,
// with hang, waits for its context: the only call ghostStates makes.
type pagedStates struct {
	ledger.Store
	delay time.Duration
	hang  bool
	calls int
}

func (p *pagedStates) WeekStates(ctx context.Context, _ digest.ISOWeek, keys []digest.Key) (map[digest.Key]digest.State, error) {
	p.calls++
	if p.hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	time.Sleep(p.delay)
	out := map[digest.Key]digest.State{}
	for i, k := range keys {
		if i%2 == 0 {
			out[k] = digest.StateSent
		}
	}
	return out, nil
}

// The ghosts of a large shard are looked up a page at a time, each page
// with its own deadline: pages that take longer in all than one deadline
// still complete (a 10,000,000-customer week's shard has a hundred and
// more), and a page the ledger never answers fails at its deadline.
func TestGhostStatesBoundsEachPageNotTheWhole(t *testing.T) {
	t.Parallel()
	kr, err := digest.ParseKeyring("k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
	if err != nil {
		t.Fatal(err)
	}
	spec := digest.Spec{Week: digest.ISOWeek{Year: 2026, Week: 48}, Type: "weekly_activity", Version: "v1", Location: time.UTC}
	customers := make([]string, 40*1000)
	for i := range customers {
		customers[i] = fmt.Sprintf("c%06d", i)
	}
	const perCall = 400 * time.Millisecond
	call := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), perCall)
	}

	slow := &pagedStates{delay: 25 * time.Millisecond} // 40 pages: a second in all
	got, err := ghostStates(context.Background(), slow, spec, kr, customers, call)
	if err != nil {
		t.Fatalf("40 pages of 25 ms under a %s deadline each: %v", perCall, err)
	}
	if slow.calls != 40 || got[digest.StateSent] != 20000 {
		t.Fatalf("%d calls, %v; want 40 calls and 20000 sent", slow.calls, got)
	}

	hung := &pagedStates{hang: true}
	if _, err := ghostStates(context.Background(), hung, spec, kr, customers, call); !errors.Is(err, context.DeadlineExceeded) || hung.calls != 1 {
		t.Fatalf("a ledger that never answers: %v after %d calls; want the first call's deadline", err, hung.calls)
	}
}
