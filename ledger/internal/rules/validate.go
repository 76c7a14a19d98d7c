package rules

import (
	"fmt"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// ValidateUnsuppress checks an Unsuppress request: keys to remove and an
// operator's name and reason, both required.
func ValidateUnsuppress(keys []digest.SuppressionKey, by ledger.Action) error {
	if len(keys) == 0 {
		return fmt.Errorf("%w: unsuppress without a key", ledger.ErrInvalid)
	}
	if by.By == "" || by.Reason == "" {
		return fmt.Errorf("%w: removing a suppression needs who and why", ledger.ErrInvalid)
	}
	return nil
}

// KeyStrings returns keys (receipt or suppression keys) as strings, for
// statement arguments.
func KeyStrings[K ~string](keys []K) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = string(k)
	}
	return out
}
