package run

import (
	"iter"
	"log/slog"
	"sync/atomic"
	"time"
)

// Pipeline stages, for Summary.Stages.
const (
	StageRead   = iota // stream the source and build each digest
	StageClaim         // claim a batch in the ledger, render the claimed
	StageStart         // mark a chunk as sending
	StageSend          // the senders, summed: look-up and send
	StageFinish        // record a batch of outcomes
	StageRenew         // renew the leases held
	numStages
)

// StageNames names the stages, index by index (the summary's keys).
var StageNames = [numStages]string{"read", "claim", "start", "send", "finish", "renew"}

// StageTime is where one stage's goroutines spent the run: working,
// waiting for input (an empty channel upstream; for read, the source's
// rows; for renew, the next tick), and blocked on output (a full channel
// downstream). The send stage sums its Concurrency goroutines and the
// start stage its two markers, so their totals reach that many times the
// wall time.
type StageTime struct {
	Busy, WaitIn, WaitOut time.Duration
}

// LogValue: seconds, so that the summary line reads without a unit.
func (t StageTime) LogValue() slog.Value {
	return slog.GroupValue(slog.Float64("busy_s", round3(t.Busy)), slog.Float64("wait_in_s", round3(t.WaitIn)),
		slog.Float64("wait_out_s", round3(t.WaitOut)))
}

func round3(d time.Duration) float64 { return float64(d.Milliseconds()) / 1000 }

// stageTimes are the live sums, added to by each stage's goroutines as
// they end.
type stageTimes [numStages]struct{ busy, in, out atomic.Int64 }

func (s *stageTimes) snapshot() map[string]StageTime {
	m := make(map[string]StageTime, numStages)
	for i := range s {
		t := StageTime{Busy: time.Duration(s[i].busy.Load()), WaitIn: time.Duration(s[i].in.Load()), WaitOut: time.Duration(s[i].out.Load())}
		if t != (StageTime{}) {
			m[StageNames[i]] = t
		}
	}
	return m
}

// stageClock times one goroutine of a stage: each mark charges the time
// since the previous one to work, input or output. It sums locally and
// adds to the shared sums once, when the goroutine ends (flush), so a
// mark costs a clock read, not a contended atomic. One per goroutine.
type stageClock struct {
	to            *stageTimes
	stage         int
	last          time.Time
	busy, in, out time.Duration
}

func (s *stageTimes) clock(stage int) *stageClock {
	return &stageClock{to: s, stage: stage, last: time.Now()}
}

func (c *stageClock) lap() time.Duration {
	now := time.Now()
	d := now.Sub(c.last)
	c.last = now
	return d
}

// worked charges the time since the last mark to work.
func (c *stageClock) worked() { c.busy += c.lap() }

// waitedIn charges it to waiting for input.
func (c *stageClock) waitedIn() { c.in += c.lap() }

// waitedOut charges it to being blocked on output.
func (c *stageClock) waitedOut() { c.out += c.lap() }

// flush charges the time since the last mark to work and adds what the
// clock holds to the shared sums.
func (c *stageClock) flush() {
	c.worked()
	s := &c.to[c.stage]
	s.busy.Add(int64(c.busy))
	s.in.Add(int64(c.in))
	s.out.Add(int64(c.out))
	c.busy, c.in, c.out = 0, 0, 0
}

// timedRows charges the time the source takes to yield each row to
// waiting for input, and the rest to the loop over them.
func timedRows[A, B any](clk *stageClock, rows iter.Seq2[A, B]) iter.Seq2[A, B] {
	return func(yield func(A, B) bool) {
		clk.worked()
		rows(func(a A, b B) bool {
			clk.waitedIn()
			ok := yield(a, b)
			clk.worked()
			return ok
		})
	}
}
