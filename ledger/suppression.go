package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// Suppressions is the ledger's suppression list, for the one-click
// endpoint, operators and (later) provider webhooks; the run only reads it
// (digest.SuppressionList). Both stores implement it as part of Store.
type Suppressions interface {
	// Suppress records s unless one of s.Keys is suppressed already (a
	// suppression made under an older key id counts): idempotent, so a
	// repeated one-click POST or a webhook delivered twice records one
	// suppression and one history row. It reports whether it added one.
	Suppress(ctx context.Context, s Suppression) (added bool, err error)
	// Unsuppress removes the suppressions stored under any of keys (the
	// candidates of one customer or address), recording each removal with
	// by's reason in the history, and reports how many it removed.
	Unsuppress(ctx context.Context, keys []digest.SuppressionKey, by Action) (removed int, err error)
	// ListSuppressions returns suppressions ordered by key, after f.After,
	// at most f.PageSize(); with f.Keys only those.
	ListSuppressions(ctx context.Context, f SuppressionFilter) ([]Suppression, error)
	// SuppressionHistory returns the adds and removals of keys (every
	// key when empty), oldest first, at most limit (default 100).
	SuppressionHistory(ctx context.Context, keys []digest.SuppressionKey, limit int) ([]SuppressionEvent, error)
}

// Suppression is one suppressed customer or address.
type Suppression struct {
	// Keys are the candidate keys of one customer or address, current key
	// id first (Keyring.CustomerKeys or AddressKeys): a new suppression is
	// stored under Keys[0]. Read back, Keys holds the one stored key.
	Keys    []digest.SuppressionKey
	Subject digest.SuppressionSubject
	Reason  digest.SuppressionReason
	// Source says what recorded it: "one-click", "operator", a webhook's
	// provider ("postmark")... Short, never customer data.
	Source string
	// By names the operator, for an operator's suppression; else empty.
	By string
	// At is when it was recorded, by the ledger's clock (set on read).
	At time.Time
}

// Key returns the key the suppression is stored under.
func (s Suppression) Key() digest.SuppressionKey {
	if len(s.Keys) == 0 {
		return ""
	}
	return s.Keys[0]
}

// Validate checks a suppression to record.
func (s Suppression) Validate() error {
	if len(s.Keys) == 0 {
		return fmt.Errorf("%w: suppression without a key", ErrInvalid)
	}
	for _, k := range s.Keys {
		if _, err := digest.ParseKey(string(k)); err != nil {
			return fmt.Errorf("%w: suppression key: %w", ErrInvalid, err)
		}
	}
	if s.Subject != digest.SubjectCustomer && s.Subject != digest.SubjectAddress {
		return fmt.Errorf("%w: suppression subject %q", ErrInvalid, s.Subject)
	}
	if _, err := digest.ParseSuppressionReason(string(s.Reason)); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if s.Source == "" || len(s.Source) > 64 {
		return fmt.Errorf("%w: suppression source %q: want 1 to 64 bytes", ErrInvalid, s.Source)
	}
	return nil
}

// SuppressionAction is what a history row of the suppression list records.
type SuppressionAction string

// The actions of the suppression history.
const (
	SuppressionAdded   SuppressionAction = "add"
	SuppressionRemoved SuppressionAction = "remove"
)

// SuppressionEvent is one add or removal of a suppression.
type SuppressionEvent struct {
	ID      int64
	Key     digest.SuppressionKey
	Subject digest.SuppressionSubject
	Action  SuppressionAction
	Reason  digest.SuppressionReason // the suppression's reason (added or removed)
	Source  string
	By      string
	Note    string // a removal's reason, given by the operator
	At      time.Time
}

// SuppressionFilter selects suppressions for ListSuppressions.
type SuppressionFilter struct {
	Keys  []digest.SuppressionKey // only these; empty: all
	After digest.SuppressionKey   // page after this key
	Limit int                     // default 100
}

// PageSize is f.Limit, or 100 when unset.
func (f SuppressionFilter) PageSize() int {
	if f.Limit <= 0 {
		return 100
	}
	return f.Limit
}
