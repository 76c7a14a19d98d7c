package doccheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsNameWhatExists checks that every identifier, test name and .go
// path the docs, README.md and Go comments quote exists in the module.
// When it fails, each line is file:line: the reference: why; fix the
// prose (or, for another module's name, add it to Allowed with why).
func TestDocsNameWhatExists(t *testing.T) {
	t.Parallel()
	problems, err := Check("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		var b strings.Builder
		for _, p := range problems {
			b.WriteString("\n" + p.String())
		}
		t.Errorf("%d references name nothing in the module:%s", len(problems), b.String())
	}
}

// TestCheckFindsStaleReferences runs the checks on a module of one file:
// each kind of reference is found when it names nothing, and passes when
// it names something.
func TestCheckFindsStaleReferences(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "run/run.go", `package run

// Verdict is what a record becomes.
type Verdict int

// Config configures a run.
type Config struct{ Week string }

// VerdictOf classifies.
func VerdictOf() Verdict { return 0 }

func (c Config) Validate() error { return nil }

func startChunk() int { return 25 }

func attrs() []string { return []string{"run.sent"} }
`)
	writeFile(t, dir, "deploy/cronjob.yaml", "spec:\n  jobTemplate:\n    spec:\n      backoffLimit: 3\n")
	writeFile(t, dir, "run/run_test.go", `package run

import "testing"

func TestVerdictOf(t *testing.T) {}
`)
	ix, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		text string
		bad  []string // the references reported, in order
	}{
		{"`run.VerdictOf` and `run.Config.Week`, `Config.Validate()`, `VerdictOf`", nil},
		{"run.VerdictOf in prose, TestVerdictOf, `run/run.go`, run_test.go", nil},
		{"`pgx.NamedArgs`, `digest.db`, `Msg.WriteTo`, `DIGEST_RATE`, `HOT`", nil},
		{"`run.Classify` moved", []string{"run.Classify"}},
		{"prose run.Classify moved", []string{"run.Classify"}},
		{"`run.Config.Shard`", []string{"run.Config.Shard"}},
		{"`Config.Lease`", []string{"Config.Lease"}},
		{"`Envelope.build`", []string{"Envelope.build"}},
		{"`VerdictSend`", []string{"VerdictSend"}},
		{"`startChunk` and `backoffLimit`, `iso_week`", nil},
		{"`composeLetter` and `podFailurePolicy`", []string{"composeLetter", "podFailurePolicy"}},
		{"see TestClassify", []string{"TestClassify"}},
		{"`BenchmarkVerdict` and FuzzVerdict", []string{"BenchmarkVerdict", "FuzzVerdict"}},
		{"in `run/stages.go` and smtp/compose.go", []string{"run/stages.go", "smtp/compose.go"}},
		{"span attributes `run.sent` and `run.gone`", []string{"run.gone"}},
	}
	for _, tt := range tests {
		var got []string
		for _, p := range ix.CheckMarkdown("docs/x.md", tt.text) {
			if p.File != "docs/x.md" || p.Line != 1 {
				t.Errorf("%q: reported at %s:%d", tt.text, p.File, p.Line)
			}
			got = append(got, p.Ref)
		}
		if strings.Join(got, ",") != strings.Join(tt.bad, ",") {
			t.Errorf("%q: reported %q, want %q", tt.text, got, tt.bad)
		}
	}

	// In a code block only test names and paths are references.
	got := ix.CheckMarkdown("docs/x.md", "text\n```sh\ngo test -run TestGone ./run/ # `run.Gone`\n```\n")
	if len(got) != 1 || got[0].Ref != "TestGone" || got[0].Line != 3 {
		t.Errorf("code block: %v, want TestGone at line 3", got)
	}
}

// TestCheckCommentsReportsFileAndLine checks Go comments and reports the
// comment's own line.
func TestCheckCommentsReportsFileAndLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "run/run.go", "package run\n\n// Run runs.\n//\n// It calls run.Classify (moved).\nfunc Run() {}\n")
	ix, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := ix.CheckComments()
	if len(got) != 1 || got[0].String() != "run/run.go:5: run.Classify: package run declares no Classify" {
		t.Errorf("got %v", got)
	}
}

func writeFile(t *testing.T, dir, name, text string) {
	t.Helper()
	path := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBenchmarksSayWhereFrom checks that every measurement of
// docs/benchmarks.md says its date, machine and load, and command.
func TestBenchmarksSayWhereFrom(t *testing.T) {
	t.Parallel()
	ix, err := Load("../..")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ix.CheckBenchmarks("docs/benchmarks.md", string(b)) {
		t.Error(p)
	}
	if n := strings.Count(string(b), "\n- Command: "); n < 5 {
		t.Errorf("docs/benchmarks.md has %d measurements with a command; the parser or the page is wrong", n)
	}
}

// TestCheckBenchmarksFindsFiguresWithoutOrigin runs the check on pages
// that each lack one thing.
func TestCheckBenchmarksFindsFiguresWithoutOrigin(t *testing.T) {
	t.Parallel()
	ix, err := Load("../..")
	if err != nil {
		t.Fatal(err)
	}
	const machines = "## Machines\n\n| id | machine |\n| --- | --- |\n| dev | 2 cores |\n\n"
	const table = "\n| a | b |\n| --- | --- |\n| 1 | 2 |\n"
	tests := []struct {
		name, page, want string // want: part of the one problem; "" for none
	}{
		{"complete", machines + "## M\n\n- Date: 2026-12-02\n- Machine: dev, load 3\n- Command: `go run ./cmd/digest-bench user --runs 3`\n" + table, ""},
		{"text without figures", machines + "## Notes\n\nNo table here.\n", ""},
		{"no date", machines + "## M\n\n- Machine: dev, load 3\n- Command: `go test ./ledger/postgres/`\n" + table, "Date"},
		{"no machine", machines + "## M\n\n- Date: 2026-12-02\n- Command: `go test ./ledger/postgres/`\n" + table, "Machine"},
		{"unknown machine", machines + "## M\n\n- Date: 2026-12-02\n- Machine: laptop, load 3\n- Command: `go test ./ledger/postgres/`\n" + table, "Machines table"},
		{"no load", machines + "## M\n\n- Date: 2026-12-02\n- Machine: dev, quiet\n- Command: `go test ./ledger/postgres/`\n" + table, "load"},
		{"no command", machines + "## M\n\n- Date: 2026-12-02\n- Machine: dev, load 3\n" + table, "Command"},
		{"unknown flag", machines + "## M\n\n- Date: 2026-12-02\n- Machine: dev, load 3\n- Command: `go run ./cmd/digest-bench user --rounds 3`\n" + table, "--rounds"},
		{"unknown package", machines + "## M\n\n- Date: 2026-12-02\n- Machine: dev, load 3\n- Command: `go test ./sender/postgres/`\n" + table, "./sender/postgres"},
	}
	for _, tt := range tests {
		got := ix.CheckBenchmarks("b.md", tt.page)
		switch {
		case tt.want == "" && len(got) != 0:
			t.Errorf("%s: %v, want none", tt.name, got)
		case tt.want != "" && (len(got) != 1 || !strings.Contains(got[0].Why, tt.want)):
			t.Errorf("%s: %v, want one problem about %s", tt.name, got, tt.want)
		}
	}
}

// TestCheckSectionsFindsMissingSections checks the sections named beside
// a doc: a heading's start or a bold paragraph lead resolves, anything
// else is reported where it is named.
func TestCheckSectionsFindsMissingSections(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "docs/ops.md", "# Ops\n\n## Where a run waits: stage times and `--trace`\n\n**Bounces.** Text.\n")
	writeFile(t, dir, "run/run.go", `package run

// See docs/ops.md, "Where a run waits" and ops.md ("Bounces"), and
// README.md, "Anything" of a doc that is not here.
// Gone: docs/ops.md, "Week state".
func Run() {}
`)
	ix, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ix.CheckSections()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].String() != `run/run.go:5: ops.md, "Week state": no section of that name in ops.md` {
		t.Errorf("got %v", got)
	}
}
