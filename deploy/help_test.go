package deploy

import (
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// cliHelp is what the digest binary's --help says: its subcommands, each
// one's flags, and the environment variables it reads.
type cliHelp struct {
	flags map[string]map[string]bool // subcommand -> flag name (without dashes)
	env   map[string]bool
}

var (
	commandLine = regexp.MustCompile(`^  ([a-z][a-z-]*)\s{2,}\S`)
	flagLine    = regexp.MustCompile(`^  -([a-z0-9][a-z0-9-]*)`)
	envLine     = regexp.MustCompile(`^  (DIGEST_[A-Z0-9_]+)\s`)
)

// readHelp runs "digest --help" and "digest <command> --help" for every
// command it lists, once per test binary.
var readHelp = sync.OnceValues(func() (*cliHelp, error) {
	out, err := exec.Command(digestBin, "--help").Output()
	if err != nil {
		return nil, err
	}
	h := &cliHelp{flags: map[string]map[string]bool{}, env: map[string]bool{}}
	// A section is headed by its first unindented line: a heading may
	// run on over more unindented lines ("Environment (each variable …").
	section, heading := "", false
	for l := range strings.Lines(string(out)) {
		l = strings.TrimRight(l, "\n")
		if l != "" && !strings.HasPrefix(l, " ") {
			if !heading {
				section = l
			}
			heading = true
			continue
		}
		heading = false
		if m := commandLine.FindStringSubmatch(l); m != nil && section == "Commands:" {
			h.flags[m[1]] = map[string]bool{}
		}
		if m := envLine.FindStringSubmatch(l); m != nil && strings.HasPrefix(section, "Environment") {
			h.env[m[1]] = true
		}
	}
	for cmd := range h.flags {
		out, err := exec.Command(digestBin, cmd, "--help").Output()
		if err != nil {
			return nil, err
		}
		for l := range strings.Lines(string(out)) {
			if m := flagLine.FindStringSubmatch(l); m != nil {
				h.flags[cmd][m[1]] = true
			}
		}
	}
	return h, nil
})

func helpOf(t *testing.T) *cliHelp {
	t.Helper()
	h, err := readHelp()
	if err != nil {
		t.Fatalf("digest --help: %v", err)
	}
	if len(h.flags) < 5 || len(h.env) < 5 || !h.flags["run"]["week"] {
		t.Fatalf("digest --help parsed to %d commands and %d variables: the help's layout changed?", len(h.flags), len(h.env))
	}
	return h
}

// checkArgs reports a subcommand or a --flag in args that the binary's help
// does not know. A flag's value may follow it or be joined with "=".
func (h *cliHelp) checkArgs(t *testing.T, where string, args []string) {
	t.Helper()
	if len(args) == 0 {
		t.Errorf("%s: no command (the image's default is --help)", where)
		return
	}
	flags, ok := h.flags[args[0]]
	if !ok {
		t.Errorf("%s: digest has no command %q", where, args[0])
		return
	}
	for _, a := range args[1:] {
		if a == "--" {
			return
		}
		name, ok := strings.CutPrefix(a, "-")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(strings.TrimPrefix(name, "-"), "=")
		if !flags[name] {
			t.Errorf("%s: digest %s has no flag %s", where, args[0], a)
		}
	}
}
