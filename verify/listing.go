package verify

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/weeklydigest/digest/digest"
)

// list reads the provider's listing and asks the ledger, a page at a
// time, which of its keys are receipts of the week: a key whose receipt
// is not sent is unrecorded; with CountByListing, the messages of each
// sent key are counted.
func (v *Verifier) list(ctx context.Context, rep *Report) (listedCounts, error) {
	var counts listedCounts
	if v.cfg.CountByListing {
		counts = listedCounts{}
	}
	seen := map[digest.Key]bool{} // unrecorded keys already reported
	if err := v.wait(ctx); err != nil {
		return nil, err
	}
	first := true
	err := v.cfg.Lister.ListKeys(ctx, func(page []digest.Key) error {
		if !first { // the first call was paced before ListKeys
			if err := v.wait(ctx); err != nil {
				return err
			}
		}
		first = false
		rep.Listed += int64(len(page))
		v.listed.Add(int64(len(page)))
		for i, k := range page {
			page[i] = v.keyCase(k)
		}
		states, err := v.cfg.Ledger.WeekStates(ctx, v.cfg.Week, page)
		if err != nil {
			return fmt.Errorf("%w: read the states of listed keys: %w", errLedger, err)
		}
		for _, k := range page {
			st, ok := states[k]
			switch {
			case !ok:
			case st == digest.StateSent:
				counts.add(k)
			case !seen[k]:
				seen[k] = true
				rep.Unrecorded = append(rep.Unrecorded, Unrecorded{Key: k, State: st})
				v.mismatches.Add(1)
			}
		}
		return nil
	})
	return counts, err
}

// listedCounts counts the listed messages of each sent key by its HMAC;
// it is the Counter of CountByListing. A nil listedCounts counts nothing.
type listedCounts map[[32]byte]int32

func hmacOf(k digest.Key) (h [32]byte, ok bool) {
	n, err := hex.Decode(h[:], []byte(k.Hex()))
	return h, err == nil && n == len(h)
}

func (c listedCounts) add(k digest.Key) {
	if h, ok := hmacOf(k); ok && c != nil {
		c[h]++
	}
}

// Count implements Counter.
func (c listedCounts) Count(_ context.Context, k digest.Key) (int, error) {
	h, ok := hmacOf(k)
	if !ok {
		return 0, fmt.Errorf("key %s has no HMAC", k)
	}
	return int(c[h]), nil
}

// keyCase gives k the key id of the week's sent keys that differs from its
// own in case only: a Mailpit tag holds the key id in lower case.
func (v *Verifier) keyCase(k digest.Key) digest.Key {
	kid := k.KeyID()
	if real := v.kids[strings.ToLower(kid)]; real != "" && real != kid {
		return digest.Key(real + ":" + k.Hex())
	}
	return k
}
