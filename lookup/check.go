package lookup

import (
	"context"
	"fmt"
	"strings"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/smtp"
)

// checkKey is a key no digest has: its hex part is all zeros, which no
// HMAC-SHA256 yields in practice.
var checkKey = digest.Key("check:" + strings.Repeat("0", 64))

// Check asks l about a key no digest has: a look-up that answers
// "not found" can be reached and accepts its credentials. It returns the
// look-up's error otherwise, and an error if such a key is found.
func Check(ctx context.Context, l digest.Lookup) error {
	ref, found, err := l.Lookup(ctx, checkKey)
	if err != nil {
		return err
	}
	if found {
		return fmt.Errorf("look-up found a message for the probe key %s (reference %q): it does not filter by key", checkKey, smtp.Clip(ref))
	}
	return nil
}
