package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Print writes the result as an aligned table, one measure a line, the
// names stable so that scripts and the test can read them.
func (r *Result) Print(w io.Writer) error {
	s := &r.Summary
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(name, format string, args ...any) {
		fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{name}, args...)...)
	}
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	line("customers", "%d (concurrency %d, batch %d)", r.Customers, r.Concurrency, r.BatchSize)
	if r.Seeded {
		line("seed", "%s", r.SeedTime.Round(time.Millisecond))
	} else {
		line("seed", "reused")
	}
	line("sent", "%d (skipped %d without activity, duplicates %d)", s.Sent, s.Skipped, s.Duplicates)
	line("run time", "%s", r.RunTime.Round(time.Millisecond))
	line("digests/s", "%.0f", r.DigestsPS)
	line("plain go-mail msg/s", "%.0f (%d messages in %s; %.0f before the run, %.0f after)",
		r.PlainPS, r.PlainSent, r.PlainTime.Round(time.Millisecond), r.PlainEach[0], r.PlainEach[1])
	line("ratio", "%.2f", r.Ratio)
	line("ledger round trips/digest", "%.4f (%d calls)", r.CallsPerDg, s.LedgerCalls)
	line("claim latency p50", "%s", s.ClaimP50.Round(time.Microsecond))
	line("claim latency p99", "%s", s.ClaimP99.Round(time.Microsecond))
	for _, op := range []string{"claim", "start", "finish"} {
		if o, ok := r.Ledger[op]; ok && o.Calls > 0 {
			line("ledger "+op, "%d calls, %.1f per call, %s per call, %s busy",
				o.Calls, float64(o.Elements)/float64(o.Calls), (o.Total / time.Duration(o.Calls)).Round(time.Microsecond), o.Total.Round(time.Millisecond))
		}
	}
	if s.Sent > 0 {
		per := func(d time.Duration) time.Duration { return (d / time.Duration(s.Sent)).Round(time.Microsecond) }
		line("CPU/digest", "%s this process (null SMTP server included), %s PostgreSQL backends of the run",
			per(r.ProcessCPU), per(r.PostgresCPU))
	}
	if r.PlainSent > 0 {
		line("CPU/plain message", "%s (null SMTP server included)", (r.PlainCPU / time.Duration(r.PlainSent)).Round(time.Microsecond))
	}
	line("peak RSS (VmHWM)", "%.1f MiB (%s)", mib(r.PeakRSS), r.PeakRSSFrom)
	line("Go heap in use", "%.1f MiB peak, %.1f MiB at end", mib(int64(r.HeapInUse)), mib(int64(r.HeapAtEnd)))
	if s.Sent > 0 {
		n := float64(s.Sent)
		line("ledger bytes/digest", "%.0f receipts + %.0f events", float64(r.ReceiptBytes)/n, float64(r.EventBytes)/n)
		line("WAL bytes/digest", "%.0f", float64(r.WALBytes)/n)
	}
	return tw.Flush()
}

// Print writes every run and, for each sink, the medians and the job's
// ratios to the limit loop and to the plain go-mail loop, as an aligned
// table: msg/s, CPU per message by process, peak RSS, busy cores, ledger
// and WAL bytes per digest, and the load average at the end of each run
// (the machine may be shared: read each number next to it).
func (r *UserResult) Print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "customers %d, %d connections, %d interleaved rounds, message %d bytes (the median-sized of the first digests the null server received)\n",
		r.Customers, r.Concurrency, r.Runs, r.MessageBytes)
	distance := "RTT 0 (loopback, no delay proxy)"
	if r.RTTMillis > 0 {
		distance = fmt.Sprintf("RTT %gms (a delay proxy, RTT/2 each way, in front of each sink)", r.RTTMillis)
	}
	fmt.Fprintf(w, "mailer %s, %s\n", r.Mailer, distance)
	fmt.Fprintln(tw, "run\tsink\tmessages\treceived\tmsg/s\tCPU µs/msg: process\tSMTP server\tPostgreSQL\tCPU busy cores\tpeak RSS MiB\tbackends\tledger B/digest\tWAL B/digest\tload1\t")
	row := func(name string, s Sample) {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.2f\t%.1f\t%d\t%.0f\t%.0f\t%.2f\t\n", name, s.Sink, s.Messages, s.Received, s.PerSecond,
			s.ProcessCPU, s.ServerCPU, s.PostgresCPU, s.Cores, s.PeakRSS, s.Backends, s.LedgerBytes, s.WALBytes, s.Load)
	}
	round := map[string]int{}
	for _, s := range r.Samples {
		key := s.Kind + "/" + string(s.Sink)
		round[key]++
		row(fmt.Sprintf("%s %d", s.Kind, round[key]), s)
	}
	for _, k := range r.Sinks {
		row("job median", k.Job)
		row("limit median", k.Limit)
		row("plain median", k.Plain)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, k := range r.Sinks {
		if _, err := fmt.Fprintf(w, "sink %s: ratio to the limit %.2f, to the plain go-mail loop %.2f (median digests/s of digest run ÷ median msg/s of each loop)\n",
			k.Sink, k.LimitRatio, k.Ratio); err != nil {
			return err
		}
		if k.Bound > 0 {
			if _, err := fmt.Fprintf(w, "sink %s at RTT %gms: %.0f digests/s over C = %d connections; bound C/(%d×RTT) = %.0f/s (%d round trip(s) per message); %.2f of the bound (%.2f over the run's own time, without start-up and preflight)\n",
				k.Sink, r.RTTMillis, k.Job.PerSecond, r.Concurrency, k.RoundTrips, k.Bound, k.RoundTrips, k.BoundRatio, k.RunBoundRatio); err != nil {
				return err
			}
		}
	}
	job := 0
	for _, s := range r.Samples {
		if s.Kind == "job" {
			job++
			if len(s.Stages) > 0 {
				if err := printStages(w, fmt.Sprintf("job %d (sink %s)", job, s.Sink), s); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// printStages writes where each pipeline stage of a job run spent it, in
// seconds and in percent of the run's wall time (send sums its
// connections, so it reaches up to their number times 100%).
func printStages(w io.Writer, name string, s Sample) error {
	fmt.Fprintf(w, "%s stages (run %.2fs wall): seconds and %% of wall\n", name, s.RunSeconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stage\tbusy\t\twaiting for input\t\tblocked on output\t\t")
	pct := func(v float64) float64 {
		if s.RunSeconds <= 0 {
			return 0
		}
		return 100 * v / s.RunSeconds
	}
	for _, stage := range []string{"read", "claim", "start", "send", "finish", "renew"} {
		t, ok := s.Stages[stage]
		if !ok {
			continue
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.0f%%\t%.2f\t%.0f%%\t%.2f\t%.0f%%\t\n", stage,
			t.Busy, pct(t.Busy), t.WaitIn, pct(t.WaitIn), t.WaitOut, pct(t.WaitOut))
	}
	return tw.Flush()
}
