package digest_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/snapshot"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// TestRenderGolden renders every customer of examples/snapshot.jsonl for
// 2026-W48 and compares subject, text and HTML with testdata/golden.
// Regenerate with: go test ./digest -run Golden -update (then read the diff).
func TestRenderGolden(t *testing.T) {
	t.Parallel()
	src, err := snapshot.OpenFile(filepath.Join("..", "examples", "snapshot.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	week, err := digest.ParseISOWeek("2026-W48")
	if err != nil {
		t.Fatal(err)
	}
	spec := digest.Spec{Week: week, Location: time.UTC, Type: "weekly_activity", Version: "v1"}
	r, err := digest.NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rec, err := range src.Records(context.Background(), digest.SourceQuery{Week: week, Location: time.UTC}) {
		if err != nil {
			t.Fatal(err)
		}
		if rec.Customer.Suppressed {
			continue // never rendered: see TestSuppressedCustomersNotSentPostgres
		}
		d, err := digest.Build(rec, spec)
		if err != nil {
			t.Fatal(err)
		}
		out, err := r.Render(&d)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Join("testdata", "golden", rec.Customer.ID)
		compareGolden(t, base+".txt", "Subject: "+out.Subject+"\n\n"+out.Text)
		compareGolden(t, base+".html", out.HTML)
		n++
	}
	if n != 21 {
		t.Errorf("rendered %d customers, want the 21 of the example", n)
	}
}

func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./digest -run Golden -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the rendering; if the change is intended, run go test ./digest -run Golden -update and review the diff\n--- got ---\n%s", path, got)
	}
}

// TestProgramsMatchTextTemplateGolden renders every golden customer (every
// language, hostile names) with the compiled templates and with
// text/template executing the same trees: the bytes must be the same.
func TestProgramsMatchTextTemplateGolden(t *testing.T) {
	t.Parallel()
	recs, spec := exampleRecords(t)
	r, err := digest.NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 21 {
		t.Fatalf("%d customers, want the 21 of the example", len(recs))
	}
	for _, rec := range recs {
		d, err := digest.Build(rec, spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := digest.DiffPrograms(r, &d); err != nil {
			t.Errorf("%s: %v", rec.Customer.ID, err)
		}
	}
}
