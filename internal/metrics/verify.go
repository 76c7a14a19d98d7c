package metrics

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// VerifyJob is the Pushgateway job of "digest verify": a job of its own,
// so that a verification never touches a run's groups (job "digest").
const VerifyJob = "digest_verify"

// Verification is the outcome of one "digest verify" of a week.
type Verification struct {
	Week       string    // the grouping label week
	Checked    int64     // sent receipts asked about
	Mismatches int       // not found, duplicated and unrecorded keys
	Finished   time.Time // when it ended
}

// PushVerify replaces the group job="digest_verify", week=v.Week at the
// Pushgateway at url (HTTP PUT: the group holds the last verification of
// the week and nothing else) with digest_verify_timestamp_seconds,
// digest_verify_checked and digest_verify_mismatches. client may be nil.
func PushVerify(ctx context.Context, url string, client *http.Client, v Verification) error {
	return replaceWeekGroup(ctx, url, client, VerifyJob, v.Week, verifyRegistry(v))
}

// verifyRegistry holds what one "digest verify" pushes.
func verifyRegistry(v Verification) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	gauge := func(name, help string, value float64) { setGauge(reg, name, help, value) }
	gauge("verify_timestamp_seconds", "Unix time the last \"digest verify\" of the week finished.", unix(v.Finished))
	gauge("verify_checked", "Sent receipts the last \"digest verify\" of the week asked the provider about.", float64(v.Checked))
	gauge("verify_mismatches", "Keys the last \"digest verify\" of the week found disagreeing: sent receipts not found or found more than once, messages without a sent receipt.", float64(v.Mismatches))
	return reg
}
