package main

import (
	"context"
	"fmt"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/weekstatus"
)

// retentionRow is one kept table's oldest row as status shows it (text and
// --json "retention"): whether prune honours the table's horizon.
type retentionRow struct {
	Table string `json:"table"`
	// Oldest is the time the table's horizon compares, of its oldest row
	// (receipts: the start of OldestWeek); nil when the table is empty.
	Oldest *time.Time `json:"oldest"`
	// AgeSeconds is how long before now Oldest is; nil with it.
	AgeSeconds *int64 `json:"age_seconds"`
	// OldestWeek: receipts only, the oldest ISO week holding one.
	OldestWeek string `json:"oldest_week,omitempty"`
}

// statusOutput is what "status --json" prints: the week's report and the
// ledger's retention (null when it could not be read).
type statusOutput struct {
	*weekstatus.Report
	Retention []retentionRow `json:"retention"`
}

// retention reads the oldest row of each kept table (ledger.Retention),
// their ages at now. A failure is logged and gives none: the week's
// verdict stands without them.
func retention(ctx context.Context, store ledger.Store, now time.Time, log *slog.Logger) []retentionRow {
	rows, err := store.OldestRows(ctx)
	if err != nil {
		log.Warn("status: cannot read the oldest rows of the kept tables", "err", err)
		return nil
	}
	out := make([]retentionRow, 0, len(rows))
	for _, r := range rows {
		row := retentionRow{Table: string(r.Table)}
		if !r.At.IsZero() {
			at, age := r.At.UTC(), int64(now.Sub(r.At)/time.Second)
			row.Oldest, row.AgeSeconds = &at, &age
		}
		if !r.Week.IsZero() {
			row.OldestWeek = r.Week.String()
		}
		out = append(out, row)
	}
	return out
}

// printRetention lists the oldest row of each kept table and its age.
func printRetention(env *Env, rows []retentionRow) error {
	if rows == nil {
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nKEPT TABLE\tOLDEST ROW\tAGE")
	for _, r := range rows {
		if r.Oldest == nil {
			fmt.Fprintf(tw, "%s\t-\t-\n", r.Table)
			continue
		}
		oldest := r.Oldest.Format(time.RFC3339)
		if r.OldestWeek != "" {
			oldest = r.OldestWeek + " (from " + oldest + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Table, oldest, rowAge(time.Duration(*r.AgeSeconds)*time.Second))
	}
	return tw.Flush()
}

// rowAge is an oldest row's age: in whole days from one day on, the unit
// of the horizons, else to the minute.
func rowAge(d time.Duration) string {
	if d >= 24*time.Hour {
		return days(d / (24 * time.Hour) * (24 * time.Hour))
	}
	return d.Round(time.Minute).String()
}
