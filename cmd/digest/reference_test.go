package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/weekstatus"
)

// referenceFile is docs/reference.md, rendered from the code by
// renderReference; regenerateReference is the one command that rewrites it.
const (
	referenceFile       = "../../docs/reference.md"
	regenerateReference = "go test ./cmd/digest -run TestReference -update"
)

var updateReference = flag.Bool("update", false, "rewrite docs/reference.md from the code (TestReference)")

// refFlag is one flag of a command, as its --help lists it.
type refFlag struct {
	name, typ, def, usage string
}

// helpFlagList runs "digest <cmd> --help" in-process with an empty
// environment (so defaults are the code's, URLs redacted as --help shows
// them) and returns its flags in --help's order.
func helpFlagList(t *testing.T, cmd string) []refFlag {
	t.Helper()
	var stdout, stderr bytes.Buffer
	env := &Env{Getenv: func(string) string { return "" }, Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr}
	if code := Main(context.Background(), []string{cmd, "--help"}, env); code != ExitOK {
		t.Fatalf("digest %s --help: exit %d\n%s", cmd, code, stderr.String())
	}
	_, list, ok := strings.Cut(stdout.String(), "\nFlags:\n")
	if !ok {
		return nil
	}
	head := regexp.MustCompile(`^  -([a-z0-9][a-z0-9-]*)(?: (\S+))?$`)
	def := regexp.MustCompile(` \(default (.*)\)$`)
	var out []refFlag
	for _, l := range strings.Split(list, "\n") {
		if m := head.FindStringSubmatch(l); m != nil {
			out = append(out, refFlag{name: m[1], typ: m[2]})
			continue
		}
		u, ok := strings.CutPrefix(l, "    \t")
		if !ok || len(out) == 0 {
			continue
		}
		f := &out[len(out)-1]
		if f.usage != "" {
			f.usage += " "
		}
		f.usage += u
	}
	for i := range out {
		if m := def.FindStringSubmatchIndex(out[i].usage); m != nil {
			out[i].def = out[i].usage[m[2]:m[3]]
			out[i].usage = out[i].usage[:m[0]]
		}
		if out[i].typ == "" {
			out[i].typ = "bool"
		}
	}
	return out
}

// cell makes s safe in a Markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	s = strings.ReplaceAll(s, "<", "&lt;")
	return strings.ReplaceAll(s, ">", "&gt;")
}

// code is s as inline code, or "" for nothing.
func code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + strings.ReplaceAll(s, "`", "'") + "`"
}

// renderReference renders docs/reference.md: every DIGEST_* variable
// (settingsTable, commandSettings) and every command's flags (its
// --help), nothing written by hand, so that it cannot drift from the code.
func renderReference(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# Reference: commands, flags and `DIGEST_*` variables\n\n")
	b.WriteString("<!-- Generated from the code (cmd/digest: settingsTable, commandSettings, each command's --help).\n")
	b.WriteString("     Do not edit. Regenerate with: " + regenerateReference + " -->\n\n")
	b.WriteString("Generated from the code; regenerate with `" + regenerateReference + "` (a test fails when this file and the code disagree). ")
	b.WriteString("What to do when something goes wrong is in the [runbook](runbook.md); how and why it works is in [operations](operations.md) and [design](design.md).\n\n")
	b.WriteString("Each variable has a flag of the same name on the commands that read it, except the secrets without a flag (env only: a command line shows in `ps` and in shell history; give those in the environment or, better, their `*_FILE`). A flag overrides its variable; defaults shown with URLs redacted.\n\n")

	b.WriteString("## Exit codes\n\n| Code | Meaning |\n|---|---|\n")
	for _, c := range []int{ExitOK, ExitFailure, ExitUsage, ExitIncomplete, ExitReview} {
		m := exitMeaning[c]
		if c == ExitOK {
			m = "success"
		}
		fmt.Fprintf(&b, "| %d | %s |\n", c, cell(m))
	}
	b.WriteString("\nWhat each one asks of you: [runbook](runbook.md#exit-codes).\n\n")

	b.WriteString("## Variables\n\n| Variable | Flag | Default | Read by | Meaning |\n|---|---|---|---|---|\n")
	for _, s := range settingsTable {
		var by []string
		for _, c := range commands() {
			if slices.Contains(commandSettings[c.name], s.env) {
				by = append(by, c.name)
			}
		}
		f := "(env only)"
		if s.flag != "" {
			f = code("--" + s.flag)
		}
		def := s.def
		if strings.HasSuffix(s.env, "_URL") {
			def = (&settingValue{p: &def, url: true}).String()
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", s.env, f, code(def), strings.Join(by, ", "), cell(s.help))
	}

	b.WriteString("\n## Commands\n\n")
	for _, c := range commands() {
		fmt.Fprintf(&b, "### digest %s\n\n%s.\n\n", c.name, strings.ToUpper(c.summary[:1])+c.summary[1:])
		flags := helpFlagList(t, c.name)
		if len(flags) == 0 {
			b.WriteString("No flags.\n\n")
			continue
		}
		b.WriteString("| Flag | Type | Default | Meaning |\n|---|---|---|---|\n")
		for _, f := range flags {
			fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", f.name, f.typ, code(f.def), cell(f.usage))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestReference: docs/reference.md is what the code renders. A flag or a
// variable added, removed or changed without regenerating fails here.
func TestReference(t *testing.T) {
	want := renderReference(t)
	if *updateReference {
		if err := os.WriteFile(referenceFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(referenceFile)
	if err != nil {
		t.Fatalf("%v; create it with: %s", err, regenerateReference)
	}
	if string(got) != want {
		t.Errorf("docs/reference.md disagrees with the code's flags and variables; regenerate it with:\n\t%s\n%s",
			regenerateReference, lineDiff(string(got), want))
	}
}

// lineDiff lists the lines only in got (-) and only in want (+), in order:
// enough to see which flag or variable changed.
func lineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	var b strings.Builder
	for _, l := range g {
		if !slices.Contains(w, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range w {
		if !slices.Contains(g, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

// TestRunbookHasASectionForEachVerdictAndExitCode: the runbook has one
// heading per verdict of "digest status" and per exit code (the alerts'
// sections are checked by deploy/monitoring_test.go), and stays a
// runbook: at most runbookMaxLines lines.
func TestRunbookHasASectionForEachVerdictAndExitCode(t *testing.T) {
	t.Parallel()
	const runbookMaxLines = 600
	b, err := os.ReadFile("../../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	body := string(b)
	for _, v := range []string{weekstatus.VerdictComplete, weekstatus.VerdictRemaining, weekstatus.VerdictReview,
		weekstatus.VerdictNotRun, weekstatus.VerdictPartial} {
		if !hasAnchor(body, v) {
			t.Errorf("docs/runbook.md: no section for the verdict %s (a heading %q)", v, "### "+v)
		}
	}
	for _, c := range []int{ExitOK, ExitFailure, ExitUsage, ExitIncomplete, ExitReview} {
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^### Exit %d:`, c)).MatchString(body) {
			t.Errorf("docs/runbook.md: no section for exit %d (a heading \"### Exit %d: …\")", c, c)
		}
	}
	if n := strings.Count(body, "\n"); n > runbookMaxLines {
		t.Errorf("docs/runbook.md has %d lines; a runbook is at most %d: move explanations to operations.md", n, runbookMaxLines)
	}
}
