package run_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/run"
)

// A retry pass that comes due while the pass before it is still sending is
// scheduled "in 0s", never in a negative time.
func TestRetryPassScheduledNeverNegative(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10)
	p := newProvider()
	retryAt := f.clock.Now().Add(time.Minute)
	p.script = func(_ digest.Key, attempt int) (bool, error) {
		if attempt == 1 {
			f.clock.Advance(10 * time.Minute) // a slow server: the retry comes due during the pass
			return false, &digest.SendError{Class: digest.SendTemporary, RetryAt: retryAt, Err: errors.New("421 try later")}
		}
		return true, nil
	}
	var logBuf bytes.Buffer // slog's handler serialises its writes
	sum := f.run(f.runner(p, p, func(c *run.Config) {
		c.Deadline = f.clock.Now().Add(24 * time.Hour)
		c.Logger = slog.New(slog.NewJSONHandler(&logBuf, nil))
	}))
	if sum.Sent != f.want || sum.Passes < 2 {
		t.Fatalf("summary %+v: want %d sent after a retry pass", sum, f.want)
	}
	scheduled := 0
	for _, line := range strings.Split(strings.TrimSpace(logBuf.String()), "\n") {
		var l struct {
			Msg string  `json:"msg"`
			In  float64 `json:"in"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.Msg != "retry pass scheduled" {
			continue
		}
		scheduled++
		if l.In < 0 {
			t.Errorf("retry pass scheduled in %v", time.Duration(l.In))
		}
	}
	if scheduled == 0 {
		t.Fatalf("no \"retry pass scheduled\" line:\n%s", logBuf.String())
	}
}
