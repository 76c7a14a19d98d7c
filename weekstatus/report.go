package weekstatus

import (
	"fmt"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// Where a Report counted the customers from (its JSON's counted_from).
const (
	CountedFromLedger = "ledger"
	CountedFromSource = "source"
)

// ReceiptStates are the states a receipt can be in, in the order status
// lists them (Report.Receipts).
var ReceiptStates = []digest.State{digest.StateClaimed, digest.StateSent, digest.StateRetryable, digest.StateFailed, digest.StateHeld, digest.StateQuarantined, digest.StateAcknowledged}

// Report is a week's status as "digest status" reports it (and the
// week-state metric pushes it); its JSON field names are stable.
type Report struct {
	Week           string           `json:"week"`
	Type           string           `json:"type"`
	Version        string           `json:"version"`
	Pinned         bool             `json:"pinned"`
	AsOf           *time.Time       `json:"as_of"`
	Zone           string           `json:"zone"`
	Shard          string           `json:"shard"`
	Expected       *int64           `json:"expected"`
	NotBuilt       int64            `json:"not_built"`
	Receipts       map[string]int64 `json:"receipts"`
	Settled        int64            `json:"settled"`
	NeedsReview    int64            `json:"needs_review"`
	Remaining      *int64           `json:"remaining"`
	Coverage       *float64         `json:"coverage"`
	Pruned         bool             `json:"pruned"`
	PrunedReceipts int64            `json:"pruned_receipts"`
	LastRun        *ledger.RunEnd   `json:"last_run"`
	// The cutoff and every customer's outcome.
	WeekEnd           time.Time  `json:"week_end"`
	Cutoff            time.Time  `json:"cutoff"`
	PartialCutoff     bool       `json:"partial_cutoff"`
	EarlyPin          bool       `json:"early_pin"`
	RepinnedFrom      *time.Time `json:"repinned_from"`
	ExcludedRows      *int64     `json:"excluded_rows"`
	ExcludedCustomers *int64     `json:"excluded_customers"`
	Customers         Counts     `json:"customers"`
	Undecided         int64      `json:"undecided"`
	NextCommand       string     `json:"next_command"`
	Verdict           string     `json:"verdict"`
	// ExitCode is the exit code of "digest status" for the verdict; the
	// binary sets it (its exit codes are its own).
	ExitCode int `json:"exit_code"`
	// CountedFrom says where the customers' outcomes came from: the
	// ledger (the runs' recorded reads against the ledger's counts) or
	// the source (every customer read and matched to its receipt);
	// SourceReason says why the source was read.
	CountedFrom  string `json:"counted_from"`
	SourceReason string `json:"source_reason,omitempty"`
	// OtherVersions are the week's other content versions of the type
	// (pinned by their runs), in order; empty when it has none.
	// CustomersMoreThanOneVersion counts the customers sent the week
	// under more than one of them and Version (a resend as a new version,
	// run --resend-as-new-version); 0 without other versions.
	OtherVersions               []string `json:"other_versions"`
	CustomersMoreThanOneVersion int64    `json:"customers_more_than_one_version"`
	// ResentAsNewVersion is what the pin keeps of a deliberate resend of
	// the week as this version (who, why, the other versions' counts:
	// digest.WeekPin.ResentAsNewVersion); empty when there was none.
	ResentAsNewVersion string `json:"resent_as_new_version,omitempty"`

	// CutoffOpen: the partial or early cutoff left activity out, or may
	// yet (Week.CutoffOpen).
	CutoffOpen bool `json:"-"`
}

// MarkPruned marks the week pruned when a tombstone of its type and
// version (or of every type) is among stones.
func (r *Report) MarkPruned(stones []digest.PruneTombstone) {
	for _, t := range stones {
		if t.Pin.Week.String() == r.Week && (t.Pin.Type == "" || (t.Pin.Type == r.Type && t.Pin.Version == r.Version)) {
			r.Pruned, r.PrunedReceipts = true, t.ReceiptsPruned
			return
		}
	}
}

// Settle derives the settled, review, remaining and coverage counts, the
// verdict and the next command from the week's receipts c (Receipts lists
// each of states, zeros included) and the customers' outcomes.
func (r *Report) Settle(c ledger.Counts, states []digest.State) {
	if r.Receipts == nil {
		r.Receipts = map[string]int64{}
	}
	for _, s := range states {
		r.Receipts[string(s)] = c.ByState[s]
	}
	cu := r.Customers
	r.Settled = cu[Sent] + cu[Failed] + cu[Acknowledged] + cu[Pruned]
	r.NeedsReview = c.NeedsReview()
	r.Undecided = cu.Undecided()
	if r.Expected != nil {
		rem := r.Undecided
		r.Remaining = &rem
		cov := 1.0
		if *r.Expected > 0 {
			cov = float64(r.Settled) / float64(*r.Expected)
		}
		r.Coverage = &cov
	}
	r.Verdict = Week{Pinned: r.Pinned, ReceiptsNeedReview: r.NeedsReview, Customers: cu, CutoffOpen: r.CutoffOpen}.Verdict()
	switch r.Verdict {
	case VerdictReview:
		r.NextCommand = "digest review list --week " + r.Week
	case VerdictComplete:
		r.NextCommand = ""
	case VerdictPartial:
		r.NextCommand = fmt.Sprintf("digest repin --week %s --reason ... (after %s)", r.Week, r.Cutoff.UTC().Format(time.RFC3339))
	default:
		r.NextCommand = "digest run --week " + r.Week
	}
}
