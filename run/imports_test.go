package run_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Package run drives the ports package digest declares and knows no
// adapter: its non-test files import the standard library and digest only.
func TestRunImportsOnlyTheDomain(t *testing.T) {
	t.Parallel()
	const domain = "github.com/weeklydigest/digest/digest"
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			stdlib := !strings.Contains(strings.Split(p, "/")[0], ".")
			if !stdlib && p != domain {
				t.Errorf("%s imports %s: run depends on the domain's interfaces only", fset.Position(imp.Pos()), p)
			}
		}
	}
}
