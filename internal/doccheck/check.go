package doccheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Problem is one reference that names nothing in the module.
type Problem struct {
	File string // relative to the root
	Line int
	Ref  string // as written
	Why  string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", p.File, p.Line, p.Ref, p.Why)
}

// Allowed are names quoted in the prose that look like the module's own
// and are not: other modules' types and the words of protocols and file
// formats. Each has its reason; a stale name of ours must not hide here.
var Allowed = map[string]string{
	"Msg.WriteTo":            "go-mail's message writer, the composer's reference",
	"PrometheusRule":         "the Prometheus Operator's resource kind",
	"DisruptionTarget":       "a Kubernetes pod condition",
	"Recreate":               "a Kubernetes Deployment strategy",
	"Local":                  "time.Local, Go's local zone, as DIGEST_TZ's value",
	"Intl":                   "JavaScript's Intl, a reference for CLDR formats",
	"MMMEd":                  "a CLDR skeleton",
	"VmHWM":                  "a field of /proc/PID/status",
	"Unreleased":             "Keep a Changelog's section",
	"yMMMd":                  "a CLDR skeleton",
	"defaultNumberingSystem": "a CLDR numbers field",
	"minimumGroupingDigits":  "a CLDR numbers field",
	"generateName":           "a Kubernetes metadata field the manifests do not use, and say why",
}

// fileSuffixes end names like digest.db that are files, not selectors.
var fileSuffixes = map[string]bool{
	"db": true, "keys": true, "json": true, "jsonl": true, "yaml": true, "yml": true,
	"md": true, "txt": true, "sql": true, "eml": true, "trace": true, "pprof": true,
	"html": true, "tmpl": true, "toml": true, "mod": true, "sum": true, "com": true,
	"org": true, "io": true, "example": true, "tar": true, "gz": true, "pem": true,
}

var (
	backquoted = regexp.MustCompile("`([^`\n]+)`")
	testName   = regexp.MustCompile(`\b(?:Test|Benchmark|Fuzz)[A-Z0-9_][A-Za-z0-9_]*`)
	goPath     = regexp.MustCompile(`(?:^|[\s("'\[` + "`" + `])((?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9][A-Za-z0-9_-]*\.go)\b`)
	// A module package's exported name in running text: run.VerdictOf.
	proseQualified = regexp.MustCompile(`\b([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?`)
	spanPath       = regexp.MustCompile(`^(?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_-]+\.go$`)
	spanTest       = regexp.MustCompile(`^(?:Test|Benchmark|Fuzz|Example)[A-Z0-9_][A-Za-z0-9_]*(?:/\S*)?$`)
	spanQualified  = regexp.MustCompile(`^([a-z][a-z0-9]*)\.([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?$`)
	spanMember     = regexp.MustCompile(`^([A-Z][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)$`)
	spanFile       = regexp.MustCompile(`^[A-Za-z0-9_./-]+$`)
	spanCamel      = regexp.MustCompile(`^[a-z][a-z0-9]*[A-Z][A-Za-z0-9]*$`)
	spanExported   = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*$`)
	callSuffix     = regexp.MustCompile(`\(.*\)$`)
)

// Check checks docs/*.md, README.md and the comments of every Go file
// under root, and the doc sections named anywhere (CheckSections), and
// returns what names nothing, sorted by file and line.
func Check(root string) ([]Problem, error) {
	ix, err := Load(root)
	if err != nil {
		return nil, err
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	docs = append(docs, filepath.Join(root, "README.md"))
	var out []Problem
	for _, d := range docs {
		b, err := os.ReadFile(d)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(root, d)
		out = append(out, ix.CheckMarkdown(filepath.ToSlash(rel), string(b))...)
	}
	out = append(out, ix.CheckComments()...)
	sections, err := ix.CheckSections()
	if err != nil {
		return nil, err
	}
	out = append(out, sections...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].File != out[j].File {
			return out[i].File < out[j].File
		}
		return out[i].Line < out[j].Line
	})
	return out, nil
}

// CheckMarkdown checks the references of one Markdown file. Code blocks
// are checked for test names and .go paths only: their other words are
// shell, SQL and query plans.
func (ix *Index) CheckMarkdown(file, text string) []Problem {
	var out []Problem
	inBlock := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inBlock = !inBlock
			continue
		}
		out = append(out, ix.checkText(file, i+1, line, !inBlock)...)
	}
	return out
}

// CheckComments checks the comments of every Go file of the index.
func (ix *Index) CheckComments() []Problem {
	var out []Problem
	for _, path := range ix.goPath {
		f := ix.goAST[path]
		for _, g := range f.Comments {
			for _, c := range g.List {
				line := ix.fset.Position(c.Pos()).Line
				for j, l := range strings.Split(c.Text, "\n") {
					if strings.HasPrefix(l, "//go:") || strings.HasPrefix(l, "//line ") {
						continue
					}
					out = append(out, ix.checkText(path, line+j, l, true)...)
				}
			}
		}
	}
	return out
}

// checkText checks one line. prose says whether it is prose, where
// backquoted spans and qualified names are references, or code, where
// only test names and paths are.
func (ix *Index) checkText(file string, line int, text string, prose bool) []Problem {
	var out []Problem
	bad := func(ref, why string) {
		if _, ok := Allowed[ref]; !ok {
			out = append(out, Problem{File: file, Line: line, Ref: ref, Why: why})
		}
	}
	seen := map[string]bool{}
	once := func(ref string) bool {
		if seen[ref] {
			return false
		}
		seen[ref] = true
		return true
	}
	for _, m := range testName.FindAllString(text, -1) {
		if once(m) && !ix.Tests[m] && !ix.Exported[m] {
			bad(m, "no test, benchmark or fuzz function of that name")
		}
	}
	for _, m := range goPath.FindAllStringSubmatch(text, -1) {
		if p := m[1]; once(p) && !ix.hasPath(file, p) {
			bad(p, "no such file")
		}
	}
	if !prose {
		return out
	}
	for _, m := range backquoted.FindAllStringSubmatch(text, -1) {
		if ref, why := ix.checkSpan(m[1]); why != "" && once(ref) {
			bad(ref, why)
		}
	}
	outside := backquoted.ReplaceAllString(text, "")
	for _, m := range proseQualified.FindAllStringSubmatch(outside, -1) {
		ref := m[0]
		if !once(ref) {
			continue
		}
		if why := ix.qualified(m[1], m[2], m[3]); why != "" {
			bad(ref, why)
		}
	}
	return out
}

// checkSpan resolves one backquoted span; why is empty when it names
// something, or is not a name of the module's shape.
func (ix *Index) checkSpan(s string) (ref, why string) {
	s = strings.TrimSpace(s)
	s = strings.TrimLeft(s, "*&")
	s = callSuffix.ReplaceAllString(s, "")
	switch {
	case spanFile.MatchString(s) && ix.hasPath("", s):
		return s, "" // Dockerfile, CHANGELOG.md
	case spanPath.MatchString(s):
		// checked by the path pattern over the whole line
		return s, ""
	case spanTest.MatchString(s):
		return s, "" // checked by the test-name pattern over the whole line
	case spanQualified.MatchString(s):
		if ix.Strings[s] {
			return s, "" // a name the code spells as a string: a span attribute such as run.sent
		}
		m := spanQualified.FindStringSubmatch(s)
		return s, ix.qualified(m[1], m[2], m[3])
	case spanMember.MatchString(s):
		m := spanMember.FindStringSubmatch(s)
		if _, ok := Allowed[m[1]]; ok {
			return s, ""
		}
		members, ok := ix.Members[m[1]]
		if !ok {
			if ix.Exported[m[1]] {
				return s, "" // a func or value: pkg-less selector of a result
			}
			return s, "no type " + m[1] + " in the module"
		}
		if !members[m[2]] {
			return s, m[1] + " has no method or field " + m[2]
		}
		return s, ""
	case spanCamel.MatchString(s):
		// An unexported Go name (composeLetter, startChunk) or a key of
		// deploy's manifests (backoffLimit): snake_case SQL and JSON
		// names never have the hump.
		if _, ok := Allowed[s]; ok || ix.anyName(s) || ix.isMember(s) || ix.ManifestKeys[s] {
			return s, ""
		}
		return s, "no name, method or field of that name in the module"
	case spanExported.MatchString(s):
		if _, ok := Allowed[s]; ok || ix.Exported[s] || ix.isMember(s) || ix.Alerts[s] || ix.Subtests[s] {
			return s, ""
		}
		return s, "no exported name, method or field of that name in the module"
	}
	return s, ""
}

// qualified resolves pkg.Name or pkg.Type.Member. A package name that is
// not the module's is another module's, not checked; so is a selector
// that ends in a file suffix (digest.db).
func (ix *Index) qualified(pkg, name, member string) string {
	names, ok := ix.Packages[pkg]
	if !ok || fileSuffixes[name] || fileSuffixes[member] {
		return ""
	}
	if !names[name] {
		// pkg.Type.Member written as pkg.Value.Method, or a method of a
		// type the package declares: pkg.Method via an embedded value.
		return "package " + pkg + " declares no " + name
	}
	if member != "" {
		if m := ix.Members[name]; m != nil && !m[member] {
			return name + " has no method or field " + member
		}
	}
	return ""
}

// anyName reports whether some package declares name at top level.
func (ix *Index) anyName(name string) bool {
	for _, names := range ix.Packages {
		if names[name] {
			return true
		}
	}
	return false
}

func (ix *Index) isMember(name string) bool {
	for _, m := range ix.Members {
		if m[name] {
			return true
		}
	}
	return false
}

// hasPath reports whether p names a file: from the root, from the
// directory of the file that mentions it, or as the tail of a path (a
// comment in ledger/ saying postgres/claim.go, a bare docs_test.go).
func (ix *Index) hasPath(from, p string) bool {
	if ix.Files[p] || ix.Files[filepath.ToSlash(filepath.Join(filepath.Dir(from), p))] {
		return true
	}
	for f := range ix.Files {
		if strings.HasSuffix(f, "/"+p) {
			return true
		}
	}
	return false
}
