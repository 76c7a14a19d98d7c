package faults

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/weeklydigest/digest/internal/e2etest"
	"github.com/weeklydigest/digest/run"
	"github.com/weeklydigest/digest/sender/mailpit"
)

// storm is a look-up endpoint that answers every request 429 with
// Retry-After, and remembers when each query came.
type storm struct {
	retryAfter string
	mu         sync.Mutex
	at         map[string][]time.Time // by query (one key per query)
	total      int
}

func (s *storm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.at[r.URL.RawQuery] = append(s.at[r.URL.RawQuery], time.Now())
	s.total++
	s.mu.Unlock()
	w.Header().Set("Retry-After", s.retryAfter)
	http.Error(w, "slow down", http.StatusTooManyRequests)
}

// Every send is dropped after its data, so every digest needs a look-up,
// and the look-up endpoint answers 429 Retry-After: 1 to everything for
// the whole run. The run keeps each key waiting at least the second it was
// told (no tight loop: a handful of requests per key), sends nothing again,
// and leaves the keys pending (exit 3's condition). With the provider
// answering again, the next run reconciles every one.
func TestLookup429StormHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(30, week40)
	px := startProxy(t, e.Mailpit.SMTPAddr(), func(int) bool { return true })
	st := &storm{retryAfter: "1", at: map[string][]time.Time{}}
	srv := httptest.NewServer(st)
	t.Cleanup(srv.Close)
	lk := mailpit.New(mailpit.Config{Base: srv.URL})

	p := openInProcess(t, e, time.Now, px.Addr())
	const window = 5 * time.Second
	r := p.runner(t, run.Config{
		Lease:       2 * time.Second,
		Backoff:     run.Backoff{Base: 50 * time.Millisecond, Max: 100 * time.Millisecond},
		LookupDelay: 50 * time.Millisecond, // the fake provider lists at once
		Deadline:    time.Now().Add(window),
	}, lk)
	start := time.Now()
	sum, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	keys := len(want)
	if sum.Sent != 0 || sum.Pending != keys || sum.Complete() {
		t.Fatalf("storm run: %+v; want nothing sent and all %d pending", sum, keys)
	}
	// Every 429 is provider-wide throttling (DigestProviderThrottling);
	// every key is left retryable for the next run.
	if sum.Throttled != sum.LookupErrors || sum.Throttled == 0 || sum.Retryable != keys {
		t.Fatalf("storm run: throttled %d, look-up errors %d, retryable %d; want every 429 counted as throttling and all %d keys left retryable",
			sum.Throttled, sum.LookupErrors, sum.Retryable, keys)
	}

	st.mu.Lock()
	minGap, perKey := time.Hour, 0
	for _, ts := range st.at {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
		perKey = max(perKey, len(ts))
		for i := 1; i < len(ts); i++ {
			minGap = min(minGap, ts[i].Sub(ts[i-1]))
		}
	}
	total, distinct := st.total, len(st.at)
	st.mu.Unlock()
	t.Logf("NUMBERS lookup-429: keys=%d requests=%d (max %d per key) min gap per key=%s run=%s lookup errors=%d",
		keys, total, perKey, minGap, elapsed.Round(time.Millisecond), sum.LookupErrors)
	if distinct != keys {
		t.Fatalf("%d distinct look-ups, want one per key (%d)", distinct, keys)
	}
	// Retry-After: 1 over a 5 s window allows about 6 requests per key.
	if limit := int(window/time.Second) + 2; perKey > limit || total > keys*limit {
		t.Fatalf("tight loop: %d requests, up to %d for one key, in %s (limit %d per key)", total, perKey, elapsed, limit)
	}
	if minGap < 900*time.Millisecond {
		t.Fatalf("Retry-After: 1 not honoured: two look-ups of one key %s apart", minGap)
	}

	// The provider answers again: every dropped send is found, none resent.
	r2 := p.runner(t, run.Config{Lease: 2 * time.Second, LookupDelay: 50 * time.Millisecond, Deadline: time.Now().Add(time.Minute)},
		mailpit.New(mailpit.Config{Base: e.Mailpit.APIURL()}))
	// The storm's last Retry-After may still run; the retry pass waits it out.
	sum2, err := r2.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sum2.Reconciled != keys || sum2.Sent != 0 {
		t.Fatalf("after the storm: %+v; want all %d reconciled, none sent", sum2, keys)
	}
	e.AssertExactlyOnce(want)
}
