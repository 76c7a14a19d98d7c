package run

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/weeklydigest/digest/digest"
)

// ResendAsNewVersion is the deliberate resend of a week under a new
// content version (run --resend-as-new-version): who asks and why, both
// recorded on the new version's pin.
type ResendAsNewVersion struct {
	By     string // operator name or id; never a customer identifier
	Reason string
}

// VersionResendError refuses a run of a content version whose week was
// already sent (or may have been) under another version of its digest
// type: a content version is a new digest, so the run would send every
// customer the week a second time. Nothing was pinned, claimed or sent.
type VersionResendError struct {
	Pin digest.SnapshotPin
	// Others counts the week's sent and in-flight receipts of the type
	// by version, this run's excluded; "" counts those of an unknown
	// version (made before receipts stored it).
	Others map[string]int64
}

func (e *VersionResendError) Error() string {
	return fmt.Sprintf("week %s of %s was already sent under another content version (%s); a run of %s would send those customers the week a second time, so nothing was claimed",
		e.Pin.Week, e.Pin.Type, VersionCounts(e.Others), e.Pin.Version)
}

// VersionCounts says how many receipts each version sent, in version
// order: "v1: 883 sent or in flight, unknown version: 2 ...".
func VersionCounts(by map[string]int64) string {
	var parts []string
	for _, v := range slices.Sorted(maps.Keys(by)) {
		name := v
		if v == "" {
			name = "an unrecorded version (receipts made before receipts stored it)"
		}
		parts = append(parts, fmt.Sprintf("%s: %d sent or in flight", name, by[v]))
	}
	return strings.Join(parts, "; ")
}

// otherVersions returns what the week sent under other versions of the
// run's type, or nil. It asks the ledger's receipts only when the week
// holds a pin of the type under another version (a few rows read); a
// receipt of an unknown version counts then too, since it may be of any
// version pinned.
func (r *Runner) otherVersions(ctx context.Context, pin digest.SnapshotPin) (map[string]int64, error) {
	vc, ok := r.Ledger.(digest.VersionCounter)
	wr, ok2 := r.Ledger.(digest.WeekReceipts)
	if !ok || !ok2 {
		return nil, nil
	}
	pins, err := wr.WeekPins(ctx, pin.Week)
	r.counters.ledgerCalls.Add(1)
	if err != nil {
		return nil, fmt.Errorf("pins of the week: %w", err)
	}
	if !slices.ContainsFunc(pins, func(p digest.SnapshotPin) bool { return p.Type == pin.Type && p.Version != pin.Version }) {
		return nil, nil
	}
	by, err := vc.SentByVersion(ctx, pin.Week, pin.Type)
	r.counters.ledgerCalls.Add(1)
	if err != nil {
		return nil, fmt.Errorf("count the week's receipts by version: %w", err)
	}
	delete(by, pin.Version)
	if len(by) == 0 {
		return nil, nil
	}
	return by, nil
}

// checkVersions refuses, before the week is pinned, a run whose week was
// sent under another version of its type, unless the resend is asked
// for (Config.ResendAsNewVersion) or was recorded on the pin by an
// earlier run of this version. An observe run warns instead. It returns
// what to record on the pin ("" for nothing).
func (r *Runner) checkVersions(ctx context.Context, pin digest.SnapshotPin) (string, error) {
	cfg := &r.Config
	others, err := r.otherVersions(ctx, pin)
	if err != nil || others == nil {
		return "", err
	}
	week := pin.Week.String()
	if pr, ok := r.Ledger.(pinReader); ok {
		wp, pinned, err := pr.Pinned(ctx, pin)
		r.counters.ledgerCalls.Add(1)
		if err != nil {
			return "", fmt.Errorf("read the week's pin: %w", err)
		}
		if pinned && wp.ResentAsNewVersion != "" {
			cfg.Logger.InfoContext(ctx, "this version resends the week on purpose, as its pin records", "week", week,
				"version", pin.Version, "resent_as_new_version", wp.ResentAsNewVersion)
			return "", nil
		}
	}
	switch {
	case cfg.Mode == ModeObserve:
		cfg.Logger.WarnContext(ctx, "this week was sent under another content version: an enforce run would refuse it", "week", week,
			"version", pin.Version, "other_versions", VersionCounts(others))
		return "", nil
	case cfg.ResendAsNewVersion != nil:
		rs := cfg.ResendAsNewVersion
		detail := fmt.Sprintf("resent as new version %s by %q: %s; the week held %s", pin.Version, rs.By, rs.Reason, VersionCounts(others))
		cfg.Logger.WarnContext(ctx, "resending the week under a new content version on purpose: every customer gets it again", "week", week,
			"version", pin.Version, "other_versions", VersionCounts(others), "by", rs.By, "reason", rs.Reason)
		return detail, nil
	}
	return "", &VersionResendError{Pin: pin, Others: others}
}
