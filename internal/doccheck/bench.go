package doccheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// A measurement of docs/benchmarks.md is a "## " section with a table of
// figures; above its table it says where the figures come from:
//
//   - Date: 2026-12-02
//   - Machine: dev, load average 17-28
//   - Command: `go test ...`
//
// The machine is an id of the page's "Machines" table, and the load is
// part of the line: on a shared machine a figure without its load says
// little. The figures of a table are its rows; they take the section's
// date, machine and command, so a row outside such a section (a table
// under a section that lacks one of them) is reported.
var (
	benchDate    = regexp.MustCompile(`(?m)^- Date: (\d{4}-\d{2}-\d{2})\b`)
	benchMachine = regexp.MustCompile(`(?m)^- Machine: ([a-z0-9-]+), (.*)$`)
	benchCommand = regexp.MustCompile(`(?m)^- Command: (.*)$`)
	benchFlag    = regexp.MustCompile(`\s--([a-z][a-z0-9-]*)`)
	benchPkgDir  = regexp.MustCompile(`\s\./([A-Za-z0-9_/.-]+?)/?(?:\s|$|\.\.\.)`)
)

// CheckBenchmarks checks the measurements of a benchmarks page: each
// section with a table says its date, its machine (an id of the Machines
// table, with the load) and its command; a command's digest-bench flags
// are digest-bench's and its package directories exist.
func (ix *Index) CheckBenchmarks(file, text string) []Problem {
	var out []Problem
	type section struct {
		title string
		line  int
		body  []string
	}
	var sections []section
	for i, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "## ") {
			sections = append(sections, section{title: strings.TrimPrefix(l, "## "), line: i + 1})
			continue
		}
		if len(sections) > 0 {
			sections[len(sections)-1].body = append(sections[len(sections)-1].body, l)
		}
	}
	machines := map[string]bool{}
	for _, s := range sections {
		if s.title != "Machines" {
			continue
		}
		for _, l := range s.body {
			cells := strings.Split(l, "|")
			if len(cells) > 2 && !strings.Contains(l, "---") && strings.TrimSpace(cells[1]) != "id" {
				machines[strings.TrimSpace(cells[1])] = true
			}
		}
	}
	if len(machines) == 0 {
		out = append(out, Problem{File: file, Line: 1, Ref: "## Machines", Why: "no Machines table with an id column"})
	}
	benchSource := ix.benchFlags()
	for _, s := range sections {
		if s.title == "Machines" {
			continue
		}
		body := strings.Join(s.body, "\n")
		firstRow := 0
		for i, l := range s.body {
			if strings.HasPrefix(l, "|") {
				firstRow = s.line + 1 + i
				break
			}
		}
		if firstRow == 0 {
			continue // no figures
		}
		bad := func(why string) {
			out = append(out, Problem{File: file, Line: firstRow, Ref: "## " + s.title, Why: why})
		}
		if !benchDate.MatchString(body) {
			bad("figures without a \"- Date: YYYY-MM-DD\" line")
		}
		if m := benchMachine.FindStringSubmatch(body); m == nil {
			bad("figures without a \"- Machine: ID, load ...\" line")
		} else {
			if !machines[m[1]] {
				bad(fmt.Sprintf("machine %q is not in the Machines table", m[1]))
			}
			if !strings.Contains(m[2], "load") {
				bad("the machine line does not give the load")
			}
		}
		cmd := benchCommand.FindStringSubmatch(body)
		if cmd == nil || !strings.Contains(cmd[1], "`") {
			bad("figures without a \"- Command: `...`\" line")
			continue
		}
		for _, span := range backquoted.FindAllStringSubmatch(cmd[1], -1) {
			c := span[1]
			if strings.Contains(c, "digest-bench") {
				for _, f := range benchFlag.FindAllStringSubmatch(c, -1) {
					if !benchSource[f[1]] {
						bad(fmt.Sprintf("digest-bench has no flag --%s", f[1]))
					}
				}
			}
			for _, d := range benchPkgDir.FindAllStringSubmatch(c+" ", -1) {
				if !ix.hasDir(d[1]) {
					bad(fmt.Sprintf("no package directory ./%s", d[1]))
				}
			}
		}
	}
	return out
}

// benchFlags returns the flag names cmd/digest-bench defines: the first
// argument of each fs.String, fs.Int, fs.Bool or fs.Duration call.
func (ix *Index) benchFlags() map[string]bool {
	flags := map[string]bool{}
	def := regexp.MustCompile(`fs\.(?:String|Int|Bool|Duration|Float64)\("([a-z0-9-]+)"`)
	for _, p := range ix.goPath {
		if !strings.HasPrefix(p, "cmd/digest-bench/") || strings.HasSuffix(p, "_test.go") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(ix.root, p))
		if err != nil {
			continue
		}
		for _, m := range def.FindAllStringSubmatch(string(b), -1) {
			flags[m[1]] = true
		}
	}
	return flags
}

func (ix *Index) hasDir(dir string) bool {
	for f := range ix.Files {
		if strings.HasPrefix(f, dir+"/") {
			return true
		}
	}
	return false
}
