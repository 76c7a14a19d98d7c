package listen_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/listen"
)

// BenchmarkOneClickPost measures the one-click POST against PostgreSQL
// over loopback at 1, 8 and 64 concurrent clients, each POST a new
// customer's suppression (the write path; a repeated POST costs less). It
// reports requests/s and the p99 latency. Bounded by -benchtime like any
// benchmark:
//
//	go test -run XXX -bench OneClickPost -benchtime 3s ./listen/
func BenchmarkOneClickPost(b *testing.B) {
	for _, clients := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			w := newBenchWorld(b, nil)
			measure(b, clients, func(client *http.Client, i int64) (*http.Response, error) {
				url := w.base + "/u/" + w.tokens.Token(fmt.Sprintf("bench_%d_%d", clients, i))
				return client.Post(url, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
			})
		})
	}
}

// BenchmarkWebhookIntake measures the webhook intake, POST
// /webhooks/{provider}, against PostgreSQL over loopback at 1, 8 and 64
// concurrent clients: each request one new event, a delivery naming a
// digest key and an address (stored, one transaction), every tenth a hard
// bounce (stored, the address suppressed, the same transaction). The
// provider is the tests' fake (its parse costs next to nothing), so this
// is the intake and the ledger:
//
//	go test -run XXX -bench WebhookIntake -benchtime 3s ./listen/
func BenchmarkWebhookIntake(b *testing.B) {
	for _, clients := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			w := newBenchWorld(b, func(c *listen.Config) {
				c.Providers = append(c.Providers, &fakeProvider{})
				c.Events = newWebhookEvents(c)
			})
			at := time.Now().UTC().Format(time.RFC3339)
			measure(b, clients, func(client *http.Client, i int64) (*http.Response, error) {
				kind := "delivered"
				if i%10 == 0 {
					kind = "hard_bounce"
				}
				id := fmt.Sprintf("bench_%d_%d", clients, i)
				key := w.keys.Key(digest.Identity{Customer: id, Week: digest.ISOWeek{Year: 2026, Week: 48}, Type: "weekly_activity", Version: "v1"})
				body, _ := json.Marshal(fakeBody{Events: []fakeEvent{{ID: id, Kind: kind, Key: string(key), Address: id + "@example.com", At: at}}})
				req, err := http.NewRequest(http.MethodPost, w.base+"/webhooks/fake", bytes.NewReader(body))
				if err != nil {
					return nil, err
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Fake-Signature", "ok")
				return client.Do(req)
			})
		})
	}
}

// measure runs b.N requests from clients goroutines, each made by do with
// its number, and reports requests/s and the p50 and p99 latencies.
func measure(b *testing.B, clients int, do func(client *http.Client, i int64) (*http.Response, error)) {
	b.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}}
	var next atomic.Int64
	lat := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				t0 := time.Now()
				res, err := do(client, i)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					b.Errorf("status %d", res.StatusCode)
					return
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
}

// benchWorld is newWorld for a benchmark: a service on a fresh schema,
// served on a loopback port, with no rate limit in reach.
type benchWorld struct {
	*world
	base string
}

func newBenchWorld(b *testing.B, mod func(*listen.Config)) *benchWorld {
	b.Helper()
	w := newWorldTB(b, func(c *listen.Config) {
		c.Rate, c.Burst = 1e9, 1<<30
		if mod != nil {
			mod(c)
		}
	})
	return &benchWorld{world: w, base: w.srv.URL}
}
