package outbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/weeklydigest/digest/digest"
)

// Count returns 1 when the outbox holds key's complete message, else 0: an
// outbox holds at most one file per key (Send keeps the first).
func (o *Outbox) Count(ctx context.Context, key digest.Key) (int, error) {
	_, found, err := o.Lookup(ctx, key)
	if err != nil || !found {
		return 0, err
	}
	return 1, nil
}

// listPage is how many directory entries ListKeys reads at a time.
const listPage = 1000

// ListKeys hands fn the keys of the outbox's files, listPage names at a
// time, from their names (FileName); temporary and other files are
// skipped.
func (o *Outbox) ListKeys(ctx context.Context, fn func([]digest.Key) error) error {
	d, err := os.Open(o.dir)
	if err != nil {
		return fmt.Errorf("outbox list: %w", err)
	}
	defer d.Close()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		entries, err := d.ReadDir(listPage)
		var keys []digest.Key
		for _, e := range entries {
			if k, ok := keyOfFile(e.Name()); ok && e.Type().IsRegular() {
				keys = append(keys, k)
			}
		}
		if len(keys) > 0 {
			if ferr := fn(keys); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) || len(entries) == 0 {
			return nil
		}
		if err != nil {
			return fmt.Errorf("outbox list: %w", err)
		}
	}
}

// keyOfFile reads the key of an outbox file name, KID_HEX.eml.
func keyOfFile(name string) (digest.Key, bool) {
	base, ok := strings.CutSuffix(name, ".eml")
	i := strings.LastIndexByte(base, '_')
	if !ok || i < 0 {
		return "", false
	}
	k, err := digest.ParseKey(base[:i] + ":" + base[i+1:])
	return k, err == nil
}
