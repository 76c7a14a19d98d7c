package digest

import (
	"context"
	"fmt"
	"strings"
)

// A suppression stops every digest to a customer, or to an address,
// whatever the source says: the run looks each customer up before
// claiming (Ledger.Suppressed) and counts the suppressed ones instead.
// The ledger holds only keys (SuppressionKey): HMACs of the customer id or
// of the address, never either in clear.

// SuppressionReason says why a customer or address is suppressed. The
// values are stored; new ones are added, never renamed.
type SuppressionReason string

// The reasons of a suppression.
const (
	// ReasonUnsubscribe: the recipient unsubscribed (one-click, RFC 8058).
	ReasonUnsubscribe SuppressionReason = "unsubscribe"
	// ReasonHardBounce: the provider reported a permanent delivery failure.
	ReasonHardBounce SuppressionReason = "hard_bounce"
	// ReasonComplaint: the recipient reported the message as spam.
	ReasonComplaint SuppressionReason = "complaint"
	// ReasonOperator: an operator suppressed by hand.
	ReasonOperator SuppressionReason = "operator"
	// ReasonSoftBounce: the provider reported temporary delivery failures
	// in several consecutive weeks (DIGEST_SOFT_BOUNCE_WEEKS).
	ReasonSoftBounce SuppressionReason = "soft_bounce"
)

// SuppressionReasons are the valid reasons, in the order operators see them.
var SuppressionReasons = []SuppressionReason{ReasonUnsubscribe, ReasonHardBounce, ReasonComplaint, ReasonOperator, ReasonSoftBounce}

// ParseSuppressionReason returns the reason named s, or an error naming
// the valid ones.
func ParseSuppressionReason(s string) (SuppressionReason, error) {
	for _, r := range SuppressionReasons {
		if string(r) == s {
			return r, nil
		}
	}
	names := make([]string, len(SuppressionReasons))
	for i, r := range SuppressionReasons {
		names[i] = string(r)
	}
	return "", fmt.Errorf("suppression reason %q: want one of %s", s, strings.Join(names, ", "))
}

// SuppressionSubject says what a suppression key is the HMAC of.
type SuppressionSubject string

// The subjects of a suppression.
const (
	// SubjectCustomer: a customer id (one-click unsubscribe, operator).
	SubjectCustomer SuppressionSubject = "customer"
	// SubjectAddress: an email address, in lower case (bounces,
	// complaints): whichever customer has it.
	SubjectAddress SuppressionSubject = "address"
)

// SuppressionKey is the stored key of a suppressed customer or address:
// "KID:HEX" like a receipt's key, HEX the HMAC-SHA256 under the secret KID
// of "customer|" and the id, or of "address|" and the address in lower
// case (Keyring.AddressKey).
type SuppressionKey string

// CustomerKeys returns the suppression keys of a customer id under every
// secret of the ring, current first: a suppression recorded before a
// rotation is found under its older key id.
func (kr *Keyring) CustomerKeys(customerID string) []SuppressionKey {
	return kr.suppressionKeys("customer|" + customerID)
}

// AddressKeys returns the suppression keys of an email address under
// every secret of the ring, current first; the first is AddressKey's.
func (kr *Keyring) AddressKeys(email string) []SuppressionKey {
	return kr.suppressionKeys("address|" + strings.ToLower(email))
}

func (kr *Keyring) suppressionKeys(canonical string) []SuppressionKey {
	keys := make([]SuppressionKey, len(kr.secrets))
	for i, s := range kr.secrets {
		keys[i] = SuppressionKey(sign(s, canonical))
	}
	return keys
}

// SuppressionList answers whether customers are suppressed: the ledger
// implements it (see Ledger).
type SuppressionList interface {
	// Suppressed returns which of keys are suppressed, in one round trip
	// whatever their number: the run asks once per batch of customers.
	Suppressed(ctx context.Context, keys []SuppressionKey) (map[SuppressionKey]bool, error)
}
