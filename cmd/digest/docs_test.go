package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/internal/metrics"
)

// runbooks are the docs whose commands and names are checked: the
// runbook, and operations.md, which explains what it tells you to run.
var runbooks = []string{"../../docs/runbook.md", "../../docs/operations.md"}

// runbookCommand is one "digest ..." command line of a runbook code block.
type runbookCommand struct {
	line int
	args []string // after "digest"
}

// runbookCommands returns the digest commands of the runbook's shell code
// blocks (```sh, or no language): lines (continuations joined) split into
// commands at unquoted &&, ; and |, with leading VAR=value assignments and
// # comments dropped.
func runbookCommands(t *testing.T, runbook, text string) []runbookCommand {
	t.Helper()
	assignment := regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`)
	var out []runbookCommand
	inBlock, shell, joined, start := false, false, "", 0
	for i, l := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(l)
		if lang, ok := strings.CutPrefix(trimmed, "```"); ok {
			inBlock, shell = !inBlock, lang == "sh" || lang == "" || lang == "bash"
			continue
		}
		if !inBlock || !shell {
			continue
		}
		if joined == "" {
			start = i + 1
		}
		if rest, ok := strings.CutSuffix(trimmed, `\`); ok {
			joined += rest + " "
			continue
		}
		line := joined + trimmed
		joined = ""
		cmds, err := docsShellCommands(line)
		if err != nil {
			t.Errorf("%s:%d: %v", runbook, start, err)
			continue
		}
		for _, words := range cmds {
			for len(words) > 0 && assignment.MatchString(words[0]) {
				words = words[1:]
			}
			if len(words) > 0 && words[0] == "digest" {
				out = append(out, runbookCommand{line: start, args: words[1:]})
			}
		}
	}
	return out
}

// docsShellCommands splits a shell line into commands (at unquoted &&, ;
// and |) of words (at blanks), honouring single and double quotes and
// stopping at an unquoted "#" that starts a word.
func docsShellCommands(s string) ([][]string, error) {
	var cmds [][]string
	var words []string
	var cur strings.Builder
	var quote rune
	inWord := false
	endWord := func() {
		if inWord {
			words, inWord = append(words, cur.String()), false
			cur.Reset()
		}
	}
	endCommand := func() {
		endWord()
		if len(words) > 0 {
			cmds, words = append(cmds, words), nil
		}
	}
loop:
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '#' && !inWord:
			break loop
		case r == '&' || r == ';' || r == '|':
			endCommand()
		case r == ' ' || r == '\t':
			endWord()
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, io.ErrUnexpectedEOF
	}
	endCommand()
	return cmds, nil
}

// helpFlags runs "digest <cmd> --help" in-process and returns its flags.
func helpFlags(t *testing.T, cmd string) map[string]bool {
	t.Helper()
	var stdout, stderr bytes.Buffer
	env := &Env{Getenv: func(string) string { return "" }, Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr}
	if code := Main(context.Background(), []string{cmd, "--help"}, env); code != ExitOK {
		t.Fatalf("digest %s --help: exit %d\n%s", cmd, code, stderr.String())
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9][a-z0-9-]*)`).FindAllStringSubmatch(stdout.String(), -1) {
		flags[m[1]] = true
	}
	return flags
}

// TestRunbookCommandsAreReal: every digest command the runbook shows is a
// real subcommand, and every flag it passes is in that subcommand's help
// (flags after "--" of schedule are run's).
func TestRunbookCommandsAreReal(t *testing.T) {
	t.Parallel()
	known := map[string]bool{}
	for _, c := range commands() {
		known[c.name] = true
	}
	flagsOf := map[string]map[string]bool{}
	seen := map[string]bool{}
	found := 0
	for _, runbook := range runbooks {
		b, err := os.ReadFile(runbook)
		if err != nil {
			t.Fatal(err)
		}
		cmds := runbookCommands(t, runbook, string(b))
		found += len(cmds)
		for _, c := range cmds {
			if len(c.args) == 0 || !known[c.args[0]] {
				t.Errorf("%s:%d: digest %s: no such command", runbook, c.line, strings.Join(c.args, " "))
				continue
			}
			sub := c.args[0]
			seen[sub] = true
			// The command itself, stopped by --help after its flags (before
			// any "--"): an unknown flag or a missing value fails the parse.
			withHelp := slices.Insert(slices.Clone(c.args), len(c.args), "--help")
			if i := slices.Index(c.args, "--"); i >= 0 {
				withHelp = slices.Insert(slices.Clone(c.args), i, "--help")
			}
			env := &Env{Getenv: func(string) string { return "" }, Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard}
			if code := Main(context.Background(), withHelp, env); code != ExitOK {
				t.Errorf("%s:%d: digest %s: exit %d, want 0", runbook, c.line, strings.Join(withHelp, " "), code)
			}
			for _, a := range c.args[1:] {
				if a == "--" {
					sub = "run"
					continue
				}
				name, ok := strings.CutPrefix(a, "-")
				if !ok {
					continue
				}
				name, _, _ = strings.Cut(strings.TrimPrefix(name, "-"), "=")
				if flagsOf[sub] == nil {
					flagsOf[sub] = helpFlags(t, sub)
				}
				if !flagsOf[sub][name] {
					t.Errorf("%s:%d: digest %s: %s has no flag %s", runbook, c.line, strings.Join(c.args, " "), sub, a)
				}
			}
		}
	}
	// The runbook's sections need at least these; a parser that finds
	// nothing must not pass.
	for _, sub := range []string{"migrate", "run", "status", "review", "key", "prune", "schedule", "preview", "send-test"} {
		if !seen[sub] {
			t.Errorf("%v show no digest %s command (found %d commands)", runbooks, sub, found)
		}
	}
}

// TestRunbookNamesAreReal: every DIGEST_ variable the runbook names is a
// setting, and every digest_ metric (alerts included) is one the job
// exports.
func TestRunbookNamesAreReal(t *testing.T) {
	t.Parallel()
	for _, runbook := range runbooks {
		checkRunbookNames(t, runbook)
	}
}

func checkRunbookNames(t *testing.T, runbook string) {
	b, err := os.ReadFile(runbook)
	if err != nil {
		t.Fatal(err)
	}
	settingNames := map[string]bool{}
	for _, s := range settingsTable {
		settingNames[s.env] = true
	}
	for _, v := range regexp.MustCompile(`\bDIGEST_[A-Z0-9_]+`).FindAllString(string(b), -1) {
		if !settingNames[v] {
			t.Errorf("%s names %s, which is not a setting", runbook, v)
		}
	}

	// Every series a run, a prune or "digest schedule" exports, and the
	// week's state that runs, "digest status" and review commands push
	// (job="digest_week", cmd/digest/status.go).
	exported := map[string]bool{}
	for _, n := range metrics.Names() {
		exported[n] = true
	}
	// What metrics.PushWeekState pushes, under job digest_week.
	for _, n := range metrics.WeekMetricNames {
		exported[n] = true
	}
	names := regexp.MustCompile(`\bdigest_[a-z0-9_]+`).FindAllString(string(b), -1)
	if len(names) < 10 {
		t.Errorf("%s names %d metrics; the alerts section is missing?", runbook, len(names))
	}
	// Names of the same shape that are not metrics: the database roles of
	// docs/security.md, the source relations, and the Pushgateway jobs of
	// the week state and of verify.
	for _, n := range []string{"digest_owner", "digest_job", "digest_customers", "digest_activity", metrics.WeekJob, "digest_verify"} {
		exported[n] = true
	}
	for _, n := range names {
		if !exported[n] {
			t.Errorf("%s names metric %s, which the job does not export", runbook, n)
		}
	}
}
