package outbox_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/sender/outbox"
	"github.com/weeklydigest/digest/verify"
)

// The outbox answers "digest verify" by counting and listing its files.
var (
	_ verify.Counter = (*outbox.Outbox)(nil)
	_ verify.Lister  = (*outbox.Outbox)(nil)
)

// An outbox counts a key once when it holds its file, else zero, and lists
// the key of every message file (paging past one read of the directory),
// skipping temporary and foreign files.
func TestOutboxCountAndListKeys(t *testing.T) {
	t.Parallel()
	o := newOutbox(t)
	ctx := t.Context()
	var want []digest.Key
	for i := range 1003 {
		k := digest.Key(fmt.Sprintf("k_1:%064x", i))
		if _, err := o.Send(ctx, testMessage(k)); err != nil {
			t.Fatal(err)
		}
		want = append(want, k)
	}
	if _, err := o.Send(ctx, testMessage(want[0])); err != nil { // a second send keeps one file
		t.Fatal(err)
	}
	for _, name := range []string{".tmp-123.eml", "notes.txt", "k1_nothex.eml"} {
		if err := os.WriteFile(filepath.Join(o.Dir(), name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := o.Count(ctx, want[0]); err != nil || n != 1 {
		t.Errorf("Count of a sent key = %d, %v; want 1", n, err)
	}
	if n, err := o.Count(ctx, testKey("k1", 'f')); err != nil || n != 0 {
		t.Errorf("Count of an unsent key = %d, %v; want 0", n, err)
	}
	var got []digest.Key
	pages := 0
	err := o.ListKeys(ctx, func(page []digest.Key) error {
		pages++
		got = append(got, page...)
		return nil
	})
	slices.Sort(got)
	if err != nil || !slices.Equal(got, want) || pages < 2 {
		t.Fatalf("ListKeys: %d keys in %d pages, %v; want the %d sent, in 2 pages or more", len(got), pages, err, len(want))
	}
}
