package verify

import (
	"fmt"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// Duplicate is a key the provider holds more than once.
type Duplicate struct {
	Key   digest.Key `json:"key"`
	Count int        `json:"count"`
}

// Unrecorded is a message whose key is a receipt of the week in another
// state than sent.
type Unrecorded struct {
	Key   digest.Key   `json:"key"`
	State digest.State `json:"state"`
}

// KeyError is a key the provider could not be asked about.
type KeyError struct {
	Key   digest.Key `json:"key"`
	Error string     `json:"error"`
}

// Report is what a verification found. Its JSON field names are stable.
type Report struct {
	Week     string `json:"week"`
	Provider string `json:"provider"`
	// Sent is the number of sent receipts of the week; Checked how many of
	// them were asked about (all, or the sample).
	Sent       int64        `json:"sent"`
	Sample     int          `json:"sample"`
	Checked    int64        `json:"checked"`
	FoundOnce  int64        `json:"found_once"`
	NotFound   []digest.Key `json:"not_found"`
	Duplicated []Duplicate  `json:"duplicated"`
	// UnrecordedChecked is false when the provider cannot list its
	// messages: then Unrecorded is empty because nobody looked.
	UnrecordedChecked bool         `json:"unrecorded_checked"`
	Listed            int64        `json:"listed"`
	Unrecorded        []Unrecorded `json:"unrecorded"`
	// Errors counts the keys the provider could not be asked about (after
	// retries), and the listing if it failed; ErrorExamples holds the
	// first few.
	Errors        int64      `json:"errors"`
	ErrorExamples []KeyError `json:"error_examples"`
	ProviderCalls int64      `json:"provider_calls"`
	Duration      Duration   `json:"duration"`
}

// Mismatches counts the disagreements: not found, duplicated, unrecorded.
func (r *Report) Mismatches() int {
	return len(r.NotFound) + len(r.Duplicated) + len(r.Unrecorded)
}

// Duration is a time.Duration that marshals as seconds.
type Duration time.Duration

// MarshalJSON writes d in seconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return fmt.Appendf(nil, "%.3f", time.Duration(d).Seconds()), nil
}
