package ledgertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// The run loop calls Claim, StartSending and Finish from different
// goroutines at once on one store. Every call must make progress: a store
// whose internal locks are taken in different orders would hang here (the
// SQLite statement cache once did).
func testConcurrentOperationsOnOneStore(t *testing.T, be Driver) {
	s, _, _ := fresh(t, be)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				k := keys(t, fmt.Sprintf("c-%d-%d", g, i))
				res, err := s.Claim(ctx, []digest.ClaimRequest{req(k, "fp")})
				if err != nil {
					errs <- err
					return
				}
				f := []digest.Fence{{Key: res[0].Key, Token: res[0].Token}}
				if _, err := s.StartSending(ctx, f); err != nil {
					errs <- err
					return
				}
				fin := digest.Finish{Key: res[0].Key, Token: res[0].Token, State: digest.StateSent, ProviderRef: "r"}
				if _, err := s.Finish(ctx, []digest.Finish{fin}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent operation failed (a hang shows as a context deadline): %v", err)
	}
	c, err := s.Counts(context.Background(), week)
	if err != nil {
		t.Fatal(err)
	}
	if c.ByState[digest.StateSent] != 90 {
		t.Fatalf("sent %d, want 90", c.ByState[digest.StateSent])
	}
}
