package bench

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// Print writes the result as Markdown: a table of the shards and their
// total, one of the week's other measures, one of the tables' sizes.
func (r *CapacityResult) Print(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Capacity: %s customers, %d shards × %d connections, week %s\n\n",
		grouped(int64(r.Customers)), r.Shards, r.Concurrency, r.Week)
	b.WriteString("| shard | sent | wall | digests/s | process CPU/digest | PostgreSQL CPU/digest | backends | peak RSS |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|\n")
	var peak float64
	var backends int
	for _, s := range r.Runs {
		peak, backends = max(peak, s.PeakRSS), backends+s.Backends
		fmt.Fprintf(&b, "| %s | %s | %.1f s | %s | %.0f µs | %.0f µs | %d | %.0f MiB |\n",
			s.Shard, grouped(int64(s.Sent)), s.Seconds, rate(s.Sent, s.Seconds), s.ProcessCPU, s.PostgresCPU, s.Backends, s.PeakRSS)
	}
	fmt.Fprintf(&b, "| **all** | **%s** | **%.1f s** | **%s** | **%.0f µs** | **%.0f µs** | %d | %.0f MiB (max) |\n\n",
		grouped(int64(r.Sent)), r.Seconds, rate(r.Sent, r.Seconds), r.ProcessCPU, r.PostgresCPU, backends, peak)

	for _, s := range r.Runs {
		for _, w := range s.Warnings {
			fmt.Fprintf(&b, "Shard %s logged: %s\n\n", s.Shard, w)
		}
	}
	b.WriteString("| measure | value |\n|---|---|\n")
	row := func(name, format string, args ...any) {
		fmt.Fprintf(&b, "| %s | "+format+" |\n", append([]any{name}, args...)...)
	}
	if r.SeedSeconds > 0 {
		row("seeding (`digest seed`, COPY)", "%.1f s, %s customers/s", r.SeedSeconds, rate(r.Customers, r.SeedSeconds))
	} else {
		row("seeding (`digest seed`, COPY)", "reused the schema's customers")
	}
	row("null SMTP server received", "%s (the shards sent %s)", grouped(r.Received), grouped(int64(r.Sent)))
	row("receipts of the week", "%s", byState(r.Receipts))
	row("null SMTP server CPU/digest", "%.0f µs", r.ServerCPU)
	row("CPU/digest, all processes", "%.0f µs", r.ProcessCPU+r.PostgresCPU+r.ServerCPU)
	row("busy cores", "%.2f (1-minute load %.2f before the run, %.2f after)", r.Cores, r.LoadBefore, r.LoadAfter)
	row("WAL/digest", "%s bytes (cluster-wide)", grouped(int64(r.WALBytes+0.5)))
	for _, t := range []struct {
		name string
		t    Timed
	}{{"status, whole week", r.Status}, {"status, one shard", r.StatusShard}} {
		from := "counted from " + t.t.CountedFrom
		if t.t.SourceReason != "" {
			from += ": " + t.t.SourceReason
		}
		row(t.name, "%.2f s, %.0f MiB peak RSS: %s (exit %d), %s", t.t.Seconds, t.t.PeakRSS, t.t.Outcome, t.t.ExitCode, from)
	}
	row("ageing the week by SQL (not part of prune)", "%.1f s", r.AgeSeconds)
	row("prune of the week", "%.2f s, %.0f MiB peak RSS: %s (exit %d)", r.Prune.Seconds, r.Prune.PeakRSS, r.Prune.Outcome, r.Prune.ExitCode)
	b.WriteString("\n| table | rows | size | bytes/digest |\n|---|--:|--:|--:|\n")
	for _, t := range r.Tables {
		per := "–"
		if r.Sent > 0 {
			per = grouped(t.Bytes / int64(r.Sent))
		}
		fmt.Fprintf(&b, "| %s | %s | %.1f MiB | %s |\n", t.Name, grouped(t.Rows), float64(t.Bytes)/(1<<20), per)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// rate is n over seconds, grouped; "–" without time.
func rate(n int, seconds float64) string {
	if seconds <= 0 {
		return "–"
	}
	return grouped(int64(float64(n)/seconds + 0.5))
}

// byState lists counts by state, largest first, then by name.
func byState(m map[string]int64) string {
	if len(m) == 0 {
		return "none"
	}
	states := slices.Sorted(maps.Keys(m))
	slices.SortStableFunc(states, func(a, b string) int { return cmp.Compare(m[b], m[a]) })
	parts := make([]string, len(states))
	for i, s := range states {
		parts[i] = s + " " + grouped(m[s])
	}
	return strings.Join(parts, ", ")
}

// grouped writes n with commas between thousands: 10,000,000.
func grouped(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
