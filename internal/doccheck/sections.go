package doccheck

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// sectionRef is a doc named with one of its sections, the way comments,
// help texts and manifests point a reader at a runbook section:
// docs/operations.md, "Week state" or operations.md ("Metrics and alerts").
var sectionRef = regexp.MustCompile(`\b([a-z][a-z0-9-]*\.md)\)?,? \(?"([^"\n]+)"`)

// boldLead is a paragraph that starts with its name in bold, a section
// without a heading: "**BDAT on a reused connection.** Could a server …".
var boldLead = regexp.MustCompile(`^\s*(?:- )?\*\*([^*]+)\*\*`)

// CheckSections checks that every section named beside a doc, in Go
// files, Markdown and deploy's YAML, begins a heading of that doc
// or a paragraph's bold lead (backquotes aside, case aside: "Where a run
// waits" names "Where a run waits: stage times and `--trace`"). A doc is
// found in docs/ or at the root.
func (ix *Index) CheckSections() ([]Problem, error) {
	headings := map[string][]string{} // doc file name -> its headings, lower case
	load := func(name string) []string {
		if h, ok := headings[name]; ok {
			return h
		}
		var h []string
		for _, p := range []string{"docs/" + name, name} {
			b, err := os.ReadFile(filepath.Join(ix.root, filepath.FromSlash(p)))
			if err != nil {
				continue
			}
			for _, l := range strings.Split(string(b), "\n") {
				if t, ok := strings.CutPrefix(l, "#"); ok {
					h = append(h, normalizeHeading(strings.TrimLeft(t, "# ")))
				}
				if m := boldLead.FindStringSubmatch(l); m != nil {
					h = append(h, normalizeHeading(strings.TrimSuffix(m[1], ".")))
				}
			}
			break
		}
		headings[name] = h
		return h
	}
	var out []Problem
	for f := range ix.Files {
		ext := path.Ext(f)
		if ext != ".go" && ext != ".md" && !(ext == ".yaml" && strings.HasPrefix(f, "deploy/")) || f == "CHANGELOG.md" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(ix.root, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range sectionRef.FindAllStringSubmatch(line, -1) {
				doc, section := m[1], normalizeHeading(m[2])
				hs := load(doc)
				if hs == nil {
					continue // not a doc of this repository (a third party's README)
				}
				found := false
				for _, h := range hs {
					if strings.HasPrefix(h, section) {
						found = true
						break
					}
				}
				if !found {
					out = append(out, Problem{File: f, Line: i + 1, Ref: doc + `, "` + m[2] + `"`, Why: "no section of that name in " + doc})
				}
			}
		}
	}
	return out, nil
}

func normalizeHeading(s string) string {
	return strings.ToLower(strings.TrimSpace(strings.ReplaceAll(s, "`", "")))
}
