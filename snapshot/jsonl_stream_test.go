package snapshot

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"testing"

	"github.com/weeklydigest/digest/digest"
)

// generated is a snapshot of n customers produced on the fly, so a test can
// stream more bytes than it ever holds.
type generated struct {
	n, next int
	buf     []byte
}

func (g *generated) Read(p []byte) (int, error) {
	for len(g.buf) == 0 {
		if g.next == g.n {
			return 0, io.EOF
		}
		g.buf = fmt.Appendf(g.buf[:0], "%s\n", line(fmt.Sprintf("cust_%09d", g.next), goodActivity+","+goodActivity+","+goodActivity, ""))
		g.next++
	}
	n := copy(p, g.buf)
	g.buf = g.buf[n:]
	return n, nil
}

// TestStreamingMemoryIsFlat reads a generated snapshot several times the
// size of the read buffer and checks that the live heap stays well below
// the bytes read. It measures the process heap, so it does not run in
// parallel with the other tests.
func TestStreamingMemoryIsFlat(t *testing.T) {
	// About 6 MiB, six read buffers, also under -short: fewer would put
	// the one buffer the scanner must hold over half of what it read.
	n := 10000
	f := &File{path: "generated.jsonl", maxLine: MaxLineLen}
	var ms runtime.MemStats
	var maxHeap uint64
	count := 0
	for rec, err := range f.scan(context.Background(), &generated{n: n}) {
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.Activity) != 3 {
			t.Fatalf("record %+v", rec)
		}
		if count++; count%2000 == 0 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			maxHeap = max(maxHeap, ms.HeapAlloc)
		}
	}
	if count != n {
		t.Fatalf("read %d records, want %d", count, n)
	}
	read := uint64(n) * uint64(len(line("cust_000000000", goodActivity+","+goodActivity+","+goodActivity, ""))+1)
	t.Logf("read %d MiB, live heap at most %d MiB", read>>20, maxHeap>>20)
	if maxHeap > read/2 {
		t.Errorf("live heap reached %d MiB while reading %d MiB", maxHeap>>20, read>>20)
	}
}

func BenchmarkScan(b *testing.B) {
	f := &File{path: "generated.jsonl", maxLine: MaxLineLen}
	const n = 1000
	b.ReportAllocs()
	for b.Loop() {
		for _, err := range f.scan(context.Background(), &generated{n: n}) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/line")
}

var _ digest.Source = (*File)(nil)
