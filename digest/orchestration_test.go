package digest_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The domain holds no goroutine orchestration: package run drives the
// pipeline. In digest's non-test files this refuses go statements, select
// statements, channel types, timers that call back on their own goroutine
// (time.AfterFunc, time.NewTicker, time.Tick, context.AfterFunc), and of
// package sync everything but what guards a value shared by concurrent
// callers (the Once family, Mutex, RWMutex: a cache such as
// defaultRenderer may be safe for concurrent use without running anything
// concurrently itself). golang.org/x/sync is refused outright.
func TestDigestHoldsNoOrchestration(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, v := range orchestration(fset, f) {
			t.Errorf("%s: orchestration belongs in package run", v)
		}
	}
	if checked == 0 {
		t.Fatal("no digest source files found")
	}
}

// The check itself finds each kind of orchestration.
func TestOrchestrationCheckFindsEachKind(t *testing.T) {
	t.Parallel()
	const src = `package x

import (
	"context"
	"sync"
	"time"
	"golang.org/x/sync/errgroup"
)

var cache sync.Mutex
var once = sync.OnceValue(func() int { return 1 })

func f(ctx context.Context, in <-chan int) {
	var wg sync.WaitGroup
	go func() {}()
	select {}
	time.AfterFunc(time.Second, func() {})
	context.AfterFunc(ctx, func() {})
	_ = make(chan struct{})
	_ = errgroup.Group{}
	_ = wg
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(orchestration(fset, f), "\n")
	for _, want := range []string{
		"x.go:7:2: imports golang.org/x/sync/errgroup",
		"x.go:13:32: channel type",
		"x.go:14:9: sync.WaitGroup",
		"x.go:15:2: go statement",
		"x.go:16:2: select statement",
		"x.go:17:2: time.AfterFunc",
		"x.go:18:2: context.AfterFunc",
		"x.go:19:11: channel type",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("check missed %q; found:\n%s", want, got)
		}
	}
	if strings.Contains(got, "sync.Mutex") || strings.Contains(got, "sync.OnceValue") {
		t.Errorf("check refused a guard it allows:\n%s", got)
	}
}

// orchestration lists, with their positions, the constructs of f that
// start or coordinate goroutines.
func orchestration(fset *token.FileSet, f *ast.File) []string {
	var found []string
	add := func(n ast.Node, what string) {
		found = append(found, fmt.Sprintf("%s: %s", fset.Position(n.Pos()), what))
	}
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, "golang.org/x/sync") {
			add(imp, "imports "+p)
		}
	}
	// Pool too: the renderer's buffers (render.go) are a cache of memory,
	// shared by whatever goroutines render, and coordinate nothing.
	allowedSync := []string{"Once", "OnceFunc", "OnceValue", "OnceValues", "Mutex", "RWMutex", "Pool"}
	refused := map[string][]string{
		"time":    {"AfterFunc", "NewTicker", "Tick"},
		"context": {"AfterFunc"},
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			add(n, "go statement")
		case *ast.SelectStmt:
			add(n, "select statement")
		case *ast.ChanType:
			add(n, "channel type")
		case *ast.SelectorExpr:
			pkg, ok := n.X.(*ast.Ident)
			if !ok {
				break
			}
			name := pkg.Name + "." + n.Sel.Name
			switch {
			case pkg.Name == "sync" && !slices.Contains(allowedSync, n.Sel.Name):
				add(n, name)
			case slices.Contains(refused[pkg.Name], n.Sel.Name):
				add(n, name)
			}
		}
		return true
	})
	return found
}
