package sender

import (
	"context"
	"fmt"
	"strings"

	"github.com/weeklydigest/digest/digest"
)

// ProbeKey is a key no digest has: its hex part is all zeros, which no
// HMAC-SHA256 yields in practice. CheckReachable asks a look-up about it.
var ProbeKey = digest.Key("check:" + strings.Repeat("0", 64))

// CheckReachable asks l about ProbeKey, a key no digest has: a look-up
// that answers "not found" can be reached and accepts its credentials. It
// returns the look-up's error otherwise, and an error if such a key is
// found.
func CheckReachable(ctx context.Context, l digest.Lookup) error {
	ref, found, err := l.Lookup(ctx, ProbeKey)
	if err != nil {
		return err
	}
	if found {
		return fmt.Errorf("look-up found a message for the probe key %s (reference %q): it does not filter by key", ProbeKey, Clip(ref))
	}
	return nil
}
