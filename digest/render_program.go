package digest

import (
	"bytes"
	"fmt"
	"strconv"
	texttemplate "text/template"
	"text/template/parse"
)

// A program is a template compiled once, by NewRenderer, from its parsed
// tree into steps that run without reflection: text/template looks every
// field up by name with reflect and boxes every value it prints, on every
// execution, which was most of what rendering a digest cost. Text is
// written as it is; a field is read through the accessors of
// render_fields.go, resolved at compile time against the type dot has at
// that point of the template.
//
// The compiler knows only what the shipped templates use: printing a
// field of the view ({{.Week}}, {{.T.Footer}}, {{$.End}}), of a row or a
// total inside a range over .Rows or .Totals, or a range's variables
// ({{$i}}, {{$t.Net}}); {{if}} and {{else}} on such a value or on
// {{not ...}}, with text/template's truth (an empty string, zero, false
// and an empty slice are false); {{range}} over .Rows or .Totals, with
// {{else}}. It refuses everything else (functions, pipelines, literals,
// {{with}}, {{template}}, nested ranges, ...), and the renderer then
// executes that template with text/template as before: a template edit is
// slower, never printed differently. TestShippedTemplatesCompile makes
// sure the shipped templates do compile, and the differential tests that
// a program prints byte for byte what text/template prints.
type program struct {
	steps []step
}

// A step writes one node of the template for the data in f.
type step func(w *bytes.Buffer, f *frame)

// frame is the data of one execution: the view ($), and the element and
// index of the range being executed, if any (ranges do not nest).
type frame struct {
	root  *view
	row   *viewRow
	total *viewTotal
	index int
}

// execute writes the template for v to w. The frame lives in the caller's
// scratch so that it does not cost an allocation per execution (the steps
// are func values, so a frame passed to them escapes).
func (p *program) execute(w *bytes.Buffer, f *frame, v *view) {
	*f = frame{root: v}
	run(p.steps, w, f)
}

func run(steps []step, w *bytes.Buffer, f *frame) {
	for _, s := range steps {
		s(w, f)
	}
}

// compileTemplate compiles the tree of t; escape makes it print every
// string escaped by escapeHTML (the HTML template, whose escapers
// parseHTML removed). It fails on any node the compiler does not support.
func compileTemplate(t *texttemplate.Template, escape bool) (*program, error) {
	if t == nil || t.Tree == nil || t.Tree.Root == nil {
		return nil, fmt.Errorf("template has no tree")
	}
	c := &compiler{escape: escape}
	steps, err := c.list(t.Tree.Root, scope{dot: dotView})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.Name(), err)
	}
	return &program{steps: steps}, nil
}

type compiler struct {
	escape bool
}

// dotKind is the type of a value the compiler resolves fields on.
type dotKind int

const (
	dotView dotKind = iota
	dotRow
	dotTotal
	dotIndex // a range's index: an int, no fields
)

// scope is what the compiler knows at a point of the template: the type
// of dot and the range variables in sight.
type scope struct {
	dot     dotKind
	inRange bool
	vars    map[string]dotKind // a range's variables: dotIndex, or dotRow/dotTotal for the element
}

func (c *compiler) list(l *parse.ListNode, s scope) ([]step, error) {
	if l == nil {
		return nil, nil
	}
	var steps []step
	for _, n := range l.Nodes {
		st, err := c.node(n, s)
		if err != nil {
			return nil, err
		}
		if st != nil {
			steps = append(steps, st)
		}
	}
	return steps, nil
}

func (c *compiler) node(n parse.Node, s scope) (step, error) {
	switch n := n.(type) {
	case *parse.TextNode:
		text := bytes.Clone(n.Text)
		return func(w *bytes.Buffer, _ *frame) { w.Write(text) }, nil
	case *parse.CommentNode:
		return nil, nil
	case *parse.ActionNode:
		if len(n.Pipe.Decl) > 0 {
			return nil, fmt.Errorf("line %d: %s declares a variable", n.Line, n)
		}
		e, err := c.pipe(n.Pipe, s)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return c.print(e, n)
	case *parse.IfNode:
		return c.ifNode(n, s)
	case *parse.RangeNode:
		return c.rangeNode(n, s)
	default:
		return nil, fmt.Errorf("unsupported %s", n)
	}
}

func (c *compiler) ifNode(n *parse.IfNode, s scope) (step, error) {
	if len(n.Pipe.Decl) > 0 {
		return nil, fmt.Errorf("line %d: %s declares a variable", n.Line, n.Pipe)
	}
	e, err := c.pipe(n.Pipe, s)
	if err != nil {
		return nil, fmt.Errorf("line %d: %w", n.Line, err)
	}
	cond := e.truth()
	then, err := c.list(n.List, s)
	if err != nil {
		return nil, err
	}
	els, err := c.list(n.ElseList, s)
	if err != nil {
		return nil, err
	}
	return func(w *bytes.Buffer, f *frame) {
		if cond(f) {
			run(then, w, f)
		} else {
			run(els, w, f)
		}
	}, nil
}

// rangeNode compiles a range over .Rows or .Totals. Its variables, if
// declared, are the element ({{range $r := ...}}) or the index and the
// element ({{range $i, $r := ...}}), as in text/template; they are not in
// sight in {{else}}, where text/template gives them other values.
func (c *compiler) rangeNode(n *parse.RangeNode, s scope) (step, error) {
	if s.inRange {
		return nil, fmt.Errorf("line %d: a range inside a range", n.Line)
	}
	p := n.Pipe
	if p.IsAssign || len(p.Decl) > 2 {
		return nil, fmt.Errorf("line %d: range %s", n.Line, p)
	}
	e, err := c.pipe(&parse.PipeNode{Cmds: p.Cmds}, s)
	if err != nil {
		return nil, fmt.Errorf("line %d: %w", n.Line, err)
	}
	var elem dotKind
	switch {
	case e.rows != nil:
		elem = dotRow
	case e.totals != nil:
		elem = dotTotal
	default:
		return nil, fmt.Errorf("line %d: range over %s, not .Rows or .Totals", n.Line, p)
	}
	body := scope{dot: elem, inRange: true, vars: map[string]dotKind{}}
	for k, v := range s.vars {
		body.vars[k] = v
	}
	switch len(p.Decl) {
	case 1:
		body.vars[p.Decl[0].Ident[0]] = elem
	case 2:
		body.vars[p.Decl[0].Ident[0]] = dotIndex
		body.vars[p.Decl[1].Ident[0]] = elem
	}
	list, err := c.list(n.List, body)
	if err != nil {
		return nil, err
	}
	els, err := c.list(n.ElseList, s)
	if err != nil {
		return nil, err
	}
	if elem == dotRow {
		return rangeStep(e.rows, func(f *frame, r *viewRow) { f.row = r }, list, els), nil
	}
	return rangeStep(e.totals, func(f *frame, t *viewTotal) { f.total = t }, list, els), nil
}

// rangeStep runs list for each element of the slice elems returns, with
// the element set in the frame by set, or els if there is none.
func rangeStep[E any](elems func(*frame) []E, set func(*frame, *E), list, els []step) step {
	return func(w *bytes.Buffer, f *frame) {
		es := elems(f)
		if len(es) == 0 {
			run(els, w, f)
			return
		}
		for i := range es {
			set(f, &es[i])
			f.index = i
			run(list, w, f)
		}
		set(f, nil)
		f.index = 0
	}
}

// print compiles the printing of e: as text/template's fmt.Fprint would
// print a string, an int or a bool, strings escaped in the HTML template.
func (c *compiler) print(e expr, n parse.Node) (step, error) {
	switch {
	case e.str != nil:
		str := e.str
		if c.escape {
			return func(w *bytes.Buffer, f *frame) { writeEscapedHTML(w, str(f)) }, nil
		}
		return func(w *bytes.Buffer, f *frame) { w.WriteString(str(f)) }, nil
	case e.num != nil:
		num := e.num
		return func(w *bytes.Buffer, f *frame) { w.Write(strconv.AppendInt(w.AvailableBuffer(), int64(num(f)), 10)) }, nil
	case e.flag != nil:
		flag := e.flag
		return func(w *bytes.Buffer, f *frame) { w.Write(strconv.AppendBool(w.AvailableBuffer(), flag(f))) }, nil
	}
	return nil, fmt.Errorf("%s prints a value that is not a string, an int or a bool", n)
}

// expr is a value resolved at compile time: exactly one accessor is set,
// by its type.
type expr struct {
	str    func(*frame) string
	num    func(*frame) int
	flag   func(*frame) bool
	rows   func(*frame) []viewRow
	totals func(*frame) []viewTotal
}

// truth is text/template's: the zero value and an empty slice are false.
func (e expr) truth() func(*frame) bool {
	switch {
	case e.str != nil:
		str := e.str
		return func(f *frame) bool { return str(f) != "" }
	case e.num != nil:
		num := e.num
		return func(f *frame) bool { return num(f) != 0 }
	case e.rows != nil:
		rows := e.rows
		return func(f *frame) bool { return len(rows(f)) > 0 }
	case e.totals != nil:
		totals := e.totals
		return func(f *frame) bool { return len(totals(f)) > 0 }
	}
	return e.flag
}

// pipe compiles a pipeline of one command: an operand, or not applied to
// one.
func (c *compiler) pipe(p *parse.PipeNode, s scope) (expr, error) {
	if len(p.Decl) > 0 || len(p.Cmds) != 1 {
		return expr{}, fmt.Errorf("unsupported pipeline %s", p)
	}
	args := p.Cmds[0].Args
	if id, ok := args[0].(*parse.IdentifierNode); ok {
		if id.Ident != "not" || len(args) != 2 {
			return expr{}, fmt.Errorf("unsupported function call %s", p)
		}
		e, err := c.operand(args[1], s)
		if err != nil {
			return expr{}, err
		}
		t := e.truth()
		return expr{flag: func(f *frame) bool { return !t(f) }}, nil
	}
	if len(args) != 1 {
		return expr{}, fmt.Errorf("unsupported command %s", p)
	}
	return c.operand(args[0], s)
}

// operand compiles a field of dot ({{.Week}}, {{.T.Footer}}) or of a
// variable ({{$.End}}, {{$t.Net}}), or a range's index ({{$i}}).
func (c *compiler) operand(n parse.Node, s scope) (expr, error) {
	switch n := n.(type) {
	case *parse.FieldNode:
		return c.fields(s.dot, dotGetter(s.dot), n.Ident, n)
	case *parse.VariableNode:
		name, path := n.Ident[0], n.Ident[1:]
		if name == "$" {
			return c.fields(dotView, rootGetter, path, n)
		}
		kind, ok := s.vars[name]
		switch {
		case !ok:
			return expr{}, fmt.Errorf("%s: a variable the compiler does not know", n)
		case kind == dotIndex && len(path) == 0:
			return expr{num: func(f *frame) int { return f.index }}, nil
		case kind == dotIndex:
			return expr{}, fmt.Errorf("%s: a field of an index", n)
		}
		return c.fields(kind, dotGetter(kind), path, n)
	}
	return expr{}, fmt.Errorf("unsupported operand %s", n)
}

// getter returns the value of a kind in a frame: a *view, *viewRow or
// *viewTotal.
type getter any

var rootGetter getter = func(f *frame) *view { return f.root }

func dotGetter(k dotKind) getter {
	switch k {
	case dotRow:
		return func(f *frame) *viewRow { return f.row }
	case dotTotal:
		return func(f *frame) *viewTotal { return f.total }
	}
	return rootGetter
}

// fields resolves the field path on a value of kind k read by get (a
// func(*frame) *view, *viewRow or *viewTotal, by k).
func (c *compiler) fields(k dotKind, get getter, path []string, n parse.Node) (expr, error) {
	if len(path) == 0 {
		return expr{}, fmt.Errorf("%s: a whole struct", n)
	}
	switch k {
	case dotView:
		v := get.(func(*frame) *view)
		switch path[0] {
		case "Rows":
			if len(path) == 1 {
				return expr{rows: func(f *frame) []viewRow { return v(f).Rows }}, nil
			}
		case "Totals":
			if len(path) == 1 {
				return expr{totals: func(f *frame) []viewTotal { return v(f).Totals }}, nil
			}
		case "T":
			if len(path) == 2 {
				return fieldExpr(func(f *frame) *labels { return &v(f).T }, labelFields, path[1], n)
			}
		default:
			if len(path) == 1 {
				return fieldExpr(v, viewFields, path[0], n)
			}
		}
	case dotRow:
		if len(path) == 1 {
			return fieldExpr(get.(func(*frame) *viewRow), rowFields, path[0], n)
		}
	case dotTotal:
		if len(path) == 1 {
			return fieldExpr(get.(func(*frame) *viewTotal), totalFields, path[0], n)
		}
	}
	return expr{}, fmt.Errorf("%s: a field the compiler does not know", n)
}

// fieldExpr reads the field name, from table, of the T that get returns.
func fieldExpr[T any](get func(*frame) *T, table map[string]field[T], name string, n parse.Node) (expr, error) {
	fl, ok := table[name]
	switch {
	case !ok:
		return expr{}, fmt.Errorf("%s: a field the compiler does not know", n)
	case fl.str != nil:
		str := fl.str
		return expr{str: func(f *frame) string { return str(get(f)) }}, nil
	case fl.num != nil:
		num := fl.num
		return expr{num: func(f *frame) int { return num(get(f)) }}, nil
	}
	flag := fl.flag
	return expr{flag: func(f *frame) bool { return flag(get(f)) }}, nil
}

// writeEscapedHTML writes escapeHTML(s) to w without building the escaped
// string: most values hold none of the characters it replaces.
func writeEscapedHTML(w *bytes.Buffer, s string) {
	last := 0
	for i := 0; i < len(s); i++ {
		var rep string
		switch s[i] {
		case 0:
			rep = "\uFFFD"
		case '"':
			rep = "&#34;"
		case '&':
			rep = "&amp;"
		case '\'':
			rep = "&#39;"
		case '+':
			rep = "&#43;"
		case '<':
			rep = "&lt;"
		case '>':
			rep = "&gt;"
		default:
			continue
		}
		w.WriteString(s[last:i])
		w.WriteString(rep)
		last = i + 1
	}
	w.WriteString(s[last:])
}
