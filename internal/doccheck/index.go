package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Index is what the module declares: the names a reference may resolve to.
type Index struct {
	// Files holds every file of the repository, by slash-separated path
	// relative to the root.
	Files map[string]bool
	// Packages maps a package's name (without _test) to its top-level
	// names, exported or not. Packages of one name (package main of each
	// command) share a set.
	Packages map[string]map[string]bool
	// Exported holds every exported top-level name of any package.
	Exported map[string]bool
	// Members maps a type's name to its methods and struct fields, across
	// packages.
	Members map[string]map[string]bool
	// Tests holds the names of every Test, Benchmark, Fuzz and Example
	// function.
	Tests map[string]bool
	// Subtests holds the names of contract-suite subtests.
	Subtests map[string]bool
	// Alerts holds the alert names of deploy/monitoring's rules, which
	// the runbook quotes as it quotes Go names.
	Alerts map[string]bool
	// ManifestKeys holds the keys of deploy/'s manifests.
	ManifestKeys map[string]bool
	// Strings holds the dotted names the code spells as string literals
	// (span attributes: digest.key_id, run.sent), which the docs quote
	// as they quote Go selectors.
	Strings map[string]bool

	root   string
	fset   *token.FileSet
	goAST  map[string]*ast.File // by path relative to the root
	goPath []string             // the keys of goAST, in walk order
}

// skipDir reports directories that hold no source of the module.
func skipDir(name string) bool {
	return name == ".git" || name == "node_modules" || name == "dist" || name == "outbox"
}

// Load parses every .go file under root.
func Load(root string) (*Index, error) {
	ix := &Index{
		Files:        map[string]bool{},
		Packages:     map[string]map[string]bool{},
		Exported:     map[string]bool{},
		Members:      map[string]map[string]bool{},
		Tests:        map[string]bool{},
		Alerts:       map[string]bool{},
		ManifestKeys: map[string]bool{},
		Strings:      map[string]bool{},
		Subtests:     map[string]bool{},
		root:         root,
		fset:         token.NewFileSet(),
		goAST:        map[string]*ast.File{},
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		ix.Files[rel] = true
		if strings.HasPrefix(rel, "deploy/") && strings.HasSuffix(rel, ".yaml") {
			return ix.addYAML(path)
		}
		if !strings.HasSuffix(rel, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(ix.fset, rel, src, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			// A file that does not parse (a fixture of broken Go) declares
			// nothing; the compiler reports real ones.
			return nil
		}
		ix.goAST[rel] = f
		ix.goPath = append(ix.goPath, rel)
		ix.add(f)
		if !strings.HasSuffix(rel, "_test.go") {
			ix.addStrings(f)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ix, nil
}

// addYAML records the alert names and the keys of a manifest under
// deploy/: the runbook quotes both (DigestRunFailed, backoffLimit).
func (ix *Index) addYAML(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for _, m := range alertName.FindAllStringSubmatch(string(b), -1) {
		ix.Alerts[m[1]] = true
	}
	for _, m := range yamlKey.FindAllStringSubmatch(string(b), -1) {
		ix.ManifestKeys[m[1]] = true
	}
	return nil
}

var (
	alertName = regexp.MustCompile(`(?m)^\s*-?\s*alert:\s*([A-Za-z0-9_]+)`)
	yamlKey   = regexp.MustCompile(`(?m)^\s*-?\s*([A-Za-z][A-Za-z0-9]*):`)
)

// addStrings records f's string literals that look like dotted names.
func (ix *Index) addStrings(f *ast.File) {
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if v, err := strconv.Unquote(lit.Value); err == nil && dottedName.MatchString(v) {
				ix.Strings[v] = true
			}
		}
		return true
	})
}

var dottedName = regexp.MustCompile(`^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$`)

func (ix *Index) add(f *ast.File) {
	pkg := strings.TrimSuffix(f.Name.Name, "_test")
	names := ix.Packages[pkg]
	if names == nil {
		names = map[string]bool{}
		ix.Packages[pkg] = names
	}
	top := func(name string) {
		names[name] = true
		if ast.IsExported(name) {
			ix.Exported[name] = true
		}
	}
	member := func(typ, name string) {
		m := ix.Members[typ]
		if m == nil {
			m = map[string]bool{}
			ix.Members[typ] = m
		}
		m[name] = true
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				top(d.Name.Name)
				// A contract suite's subtests are functions named
				// test<Subtest> (ledger/ledgertest), quoted by the subtest.
				if sub, ok := strings.CutPrefix(d.Name.Name, "test"); ok && ast.IsExported(sub) {
					ix.Subtests[sub] = true
				}
				for _, p := range []string{"Test", "Benchmark", "Fuzz", "Example"} {
					if strings.HasPrefix(d.Name.Name, p) {
						ix.Tests[d.Name.Name] = true
					}
				}
				continue
			}
			if typ := recvType(d.Recv.List[0].Type); typ != "" {
				member(typ, d.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					top(s.Name.Name)
					ix.addFields(s.Name.Name, s.Type, member)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						top(n.Name)
					}
				}
			}
		}
	}
}

// addFields records the fields of a struct type and the methods of an
// interface type as members of typ.
func (ix *Index) addFields(typ string, expr ast.Expr, member func(typ, name string)) {
	var list *ast.FieldList
	switch t := expr.(type) {
	case *ast.StructType:
		list = t.Fields
	case *ast.InterfaceType:
		list = t.Methods
	default:
		return
	}
	for _, f := range list.List {
		for _, n := range f.Names {
			member(typ, n.Name)
		}
		if len(f.Names) == 0 { // embedded: its name is the field's
			if name := recvType(f.Type); name != "" {
				member(typ, name)
			}
		}
	}
}

// recvType returns the type name of a receiver or embedded field:
// T, *T, T[P], pkg.T.
func recvType(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.StarExpr:
		return recvType(t.X)
	case *ast.IndexExpr:
		return recvType(t.X)
	case *ast.IndexListExpr:
		return recvType(t.X)
	case *ast.SelectorExpr:
		return t.Sel.Name
	}
	return ""
}
