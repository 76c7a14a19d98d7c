package bench

import (
	"context"
	"sync"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// timedLedger passes every call to the real ledger and adds up, per
// method, the calls, the elements and the time: what bounds a run that
// falls short is then visible in its output.
type timedLedger struct {
	digest.Ledger
	mu  sync.Mutex
	ops map[string]*OpTime
}

// OpTime is what one ledger method cost during the run.
type OpTime struct {
	Calls    int
	Elements int
	Total    time.Duration
}

func newTimedLedger(l digest.Ledger) *timedLedger {
	return &timedLedger{Ledger: l, ops: map[string]*OpTime{}}
}

func (t *timedLedger) add(op string, n int, t0 time.Time) {
	d := time.Since(t0)
	t.mu.Lock()
	o := t.ops[op]
	if o == nil {
		o = &OpTime{}
		t.ops[op] = o
	}
	o.Calls++
	o.Elements += n
	o.Total += d
	t.mu.Unlock()
}

func (t *timedLedger) Claim(ctx context.Context, reqs []digest.ClaimRequest) ([]digest.ClaimResult, error) {
	defer t.add("claim", len(reqs), time.Now())
	return t.Ledger.Claim(ctx, reqs)
}

func (t *timedLedger) StartSending(ctx context.Context, fences []digest.Fence) ([]error, error) {
	defer t.add("start", len(fences), time.Now())
	return t.Ledger.StartSending(ctx, fences)
}

func (t *timedLedger) Finish(ctx context.Context, fs []digest.Finish) ([]error, error) {
	defer t.add("finish", len(fs), time.Now())
	return t.Ledger.Finish(ctx, fs)
}

func (t *timedLedger) snapshot() map[string]OpTime {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]OpTime, len(t.ops))
	for k, v := range t.ops {
		out[k] = *v
	}
	return out
}
