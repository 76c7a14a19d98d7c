package listen_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
			w := newBenchWorld(b)
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
						url := w.base + "/u/" + w.tokens.Token(fmt.Sprintf("bench_%d_%d", clients, i))
						t0 := time.Now()
						res, err := client.Post(url, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
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
		})
	}
}

// benchWorld is newWorld for a benchmark: a service on a fresh schema,
// served on a loopback port, with no rate limit in reach.
type benchWorld struct {
	*world
	base string
}

func newBenchWorld(b *testing.B) *benchWorld {
	b.Helper()
	w := newWorldTB(b, func(c *listen.Config) { c.Rate, c.Burst = 1e9, 1<<30 })
	return &benchWorld{world: w, base: w.srv.URL}
}
