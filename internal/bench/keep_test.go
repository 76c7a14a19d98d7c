package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The plain loop's message is the median-sized of the first keepSample
// the null server receives: written at the first count before the sample
// is full, by itself once it is, and never replaced after.
func TestKeptSampleWritesTheMedian(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "median.eml")
	k := &keptSample{file: file}
	for _, n := range []int{10, 50, 20, 40, 30} {
		if read, err := k.add(strings.NewReader(strings.Repeat("x", n))); !read || err != nil {
			t.Fatalf("add %d: read %v, %v", n, read, err)
		}
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("written before a count: %v", err)
	}
	if err := k.write(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); len(b) != 30 {
		t.Errorf("kept %d bytes, want the median's 30", len(b))
	}
	if read, _ := k.add(strings.NewReader("later")); read {
		t.Error("a message after the write was kept")
	}

	full := &keptSample{file: filepath.Join(t.TempDir(), "full.eml")}
	for i := range keepSample + 3 {
		read, err := full.add(bytes.NewReader(bytes.Repeat([]byte("y"), 1000+i)))
		if err != nil || read != (i < keepSample) {
			t.Fatalf("message %d: read %v, %v", i, read, err)
		}
	}
	if b, _ := os.ReadFile(full.file); len(b) != 1000+keepSample/2 {
		t.Errorf("kept %d bytes, want the median of the first %d: %d", len(b), keepSample, 1000+keepSample/2)
	}
}
