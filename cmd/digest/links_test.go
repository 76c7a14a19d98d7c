package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocLinksResolve checks that every relative link in README.md and
// docs/*.md names a file or folder of this repository, and that a
// "#fragment" names a heading of the file it points to: a user who clones
// the project has nothing else (no ../shared, no wiki).
func TestDocLinksResolve(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	checked := 0
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			resolved := f
			if path != "" {
				resolved = filepath.Join(filepath.Dir(f), path)
				rel, err := filepath.Rel("../..", resolved)
				if err != nil || strings.HasPrefix(rel, "..") {
					t.Errorf("%s: link %q leaves the repository", f, target)
					continue
				}
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s: link %q: %v", f, target, err)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(resolved, ".md") {
				body, err := os.ReadFile(resolved)
				if err != nil {
					t.Errorf("%s: link %q: %v", f, target, err)
					continue
				}
				if !hasAnchor(string(body), frag) {
					t.Errorf("%s: link %q: no heading with anchor #%s in %s", f, target, frag, resolved)
				}
			}
			checked++
		}
	}
	if checked < 5 {
		t.Fatalf("checked only %d links; the pattern or the paths are wrong", checked)
	}
}

// hasAnchor reports whether a Markdown heading of body has the anchor
// GitHub derives from it: lower case, punctuation dropped, spaces as '-'.
func hasAnchor(body, anchor string) bool {
	for _, line := range strings.Split(body, "\n") {
		h, ok := strings.CutPrefix(line, "#")
		if !ok {
			continue
		}
		h = strings.TrimSpace(strings.TrimLeft(h, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		if b.String() == anchor {
			return true
		}
	}
	return false
}

// TestMakeCleanRemovesTheEmbeddedDefaultsFiles checks that "make clean"
// removes every file the embedded quick start creates: the SQLite ledger
// and its WAL, the generated keyring next to it, and the outbox.
func TestMakeCleanRemovesTheEmbeddedDefaultsFiles(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("make", "-s", "-n", "-C", "../..", "clean").Output()
	if err != nil {
		t.Fatalf("make -n clean: %v", err)
	}
	words := strings.Fields(string(out))
	for _, want := range []string{"digest.db", "digest.db-*", "digest.db.keys", "outbox"} {
		if !slices.Contains(words, want) {
			t.Errorf("make clean does not remove %s: %s", want, out)
		}
	}
}
