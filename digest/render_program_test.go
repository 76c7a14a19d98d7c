package digest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	texttemplate "text/template"
)

// The shipped templates must all compile: a refused node would silently
// put every digest back on text/template's reflective path.
func TestShippedTemplatesCompile(t *testing.T) {
	t.Parallel()
	r, err := NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	if len(r.types) == 0 {
		t.Fatal("no digest types")
	}
	for typ, tt := range r.types {
		for name, c := range map[string]compiledTemplate{"subject": tt.subject, "text": tt.text, "html": tt.html} {
			if c.prog == nil {
				_, err := compileTemplate(c.tmpl, c.html)
				t.Errorf("%s %s template is executed by text/template: %v", typ, name, err)
			}
		}
	}
}

// TestFieldTablesComplete checks render_fields.go against the types: every
// field of view (but Rows, Totals and T, which the compiler handles), of
// labels, viewRow and viewTotal has an accessor of its type, and each
// accessor reads the field it is named after.
func TestFieldTablesComplete(t *testing.T) {
	t.Parallel()
	checkFieldTable(t, viewFields, "Rows", "Totals", "T")
	checkFieldTable(t, labelFields)
	checkFieldTable(t, rowFields)
	checkFieldTable(t, totalFields)
}

func checkFieldTable[T any](t *testing.T, table map[string]field[T], skip ...string) {
	t.Helper()
	var x T
	rv := reflect.ValueOf(&x).Elem()
	typ := rv.Type()
	// A distinct value in every field, so that an accessor reading another
	// field gives another value.
	for i := range typ.NumField() {
		switch f := rv.Field(i); f.Kind() {
		case reflect.String:
			f.SetString(typ.Field(i).Name)
		case reflect.Int:
			f.SetInt(int64(i + 1))
		}
	}
	seen := 0
	for i := range typ.NumField() {
		sf := typ.Field(i)
		if contains(skip, sf.Name) {
			continue
		}
		seen++
		fl, ok := table[sf.Name]
		if !ok {
			t.Errorf("%s.%s has no accessor in render_fields.go", typ.Name(), sf.Name)
			continue
		}
		switch sf.Type.Kind() {
		case reflect.String:
			if fl.str == nil || fl.str(&x) != sf.Name {
				t.Errorf("%s.%s: the accessor does not read it as a string", typ.Name(), sf.Name)
			}
		case reflect.Int:
			if fl.num == nil || fl.num(&x) != i+1 {
				t.Errorf("%s.%s: the accessor does not read it as an int", typ.Name(), sf.Name)
			}
		case reflect.Bool:
			// Each bool in turn, the others false.
			rv.Field(i).SetBool(true)
			other := false
			for j := range typ.NumField() {
				if j != i && rv.Field(j).Kind() == reflect.Bool {
					other = other || table[typ.Field(j).Name].flag != nil && table[typ.Field(j).Name].flag(&x)
				}
			}
			if fl.flag == nil || !fl.flag(&x) || other {
				t.Errorf("%s.%s: the accessor does not read it as a bool", typ.Name(), sf.Name)
			}
			rv.Field(i).SetBool(false)
		default:
			t.Errorf("%s.%s is a %s, which the compiler cannot print", typ.Name(), sf.Name, sf.Type)
		}
	}
	if len(table) != seen {
		t.Errorf("render_fields.go has %d accessors of %s, which has %d fields", len(table), typ.Name(), seen)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// extraTemplates exercise what the compiler supports beyond the shipped
// templates' use of it, for the differential tests.
var extraTemplates = []string{
	`{{.Week}}|{{.Empty}}|{{not .Empty}}|{{if .Greeting}}g{{else if .Zone}}z{{else}}none{{end}}|{{$.T.Subject}}`,
	`{{range .Rows}}[{{.Date}}|{{.Negative}}|{{not .Negative}}|{{$.T.Date}}|{{$.Week}}]{{else}}no rows {{.T.EmptyHTML}}{{end}}`,
	`{{range $t := .Totals}}{{$t.Count}}{{.Currency}}{{if $t.Count}}+{{.Count}}{{end}}{{if .Transactions}}{{$t.Net}}{{end}}{{end}}`,
	`{{range $i, $r := .Rows}}{{if $i}},{{end}}{{$i}}:{{$r.Kind}}{{if not $r.Description}}-{{else}}{{$r.AmountPadded}}{{end}}{{end}}`,
	`{{if .Rows}}rows{{end}}{{if not .Totals}}no totals{{end}}{{/* a comment */}}{{if not .Rows}}x{{else}}y{{end}}`,
	"{{- range .Totals -}}\n {{.Net}} {{- end}}\n{{range .Totals}}{{.Credits}}{{else}}{{if .Empty}}e{{end}}{{end}}",
}

// differential compiles tmpl (escaped as the HTML template when escape)
// and checks that its program prints what text/template prints for v (for
// htmlView(v), when escape).
func differential(t *testing.T, tmpl *texttemplate.Template, escape bool, v *view) {
	t.Helper()
	p, err := compileTemplate(tmpl, escape)
	if err != nil {
		t.Fatalf("%s does not compile: %v", tmpl.Name(), err)
	}
	var got, want bytes.Buffer
	var f frame
	p.execute(&got, &f, v)
	data := v
	if escape {
		data = htmlView(v)
	}
	if err := tmpl.Execute(&want, data); err != nil {
		t.Fatalf("text/template: %v", err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("%s (escape %v): the program printed\n%q\ntext/template printed\n%q", tmpl.Name(), escape, got.String(), want.String())
	}
}

// differentialTemplates returns the shipped templates and extraTemplates,
// each with whether it is escaped as HTML.
func differentialTemplates(t testing.TB) []compiledTemplate {
	r, err := NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	var out []compiledTemplate
	for _, tt := range r.types {
		out = append(out, tt.subject, tt.text, tt.html)
	}
	for i, src := range extraTemplates {
		tmpl := texttemplate.Must(texttemplate.New(fmt.Sprintf("extra%d", i)).Parse(src))
		out = append(out, compiledTemplate{tmpl: tmpl}, compiledTemplate{tmpl: tmpl, html: true})
	}
	return out
}

// randomView fills every field of a view from strs and rng: rows and
// totals from none to three.
func randomView(rng *rand.Rand, strs []string) *view {
	v := &view{Rows: make([]viewRow, rng.IntN(4)), Totals: make([]viewTotal, rng.IntN(4))}
	var fill func(reflect.Value)
	fill = func(f reflect.Value) {
		switch f.Kind() {
		case reflect.String:
			f.SetString(strs[rng.IntN(len(strs))])
		case reflect.Int:
			f.SetInt(int64(rng.IntN(3)) - 1)
		case reflect.Bool:
			f.SetBool(rng.IntN(2) == 0)
		case reflect.Struct:
			for i := range f.NumField() {
				fill(f.Field(i))
			}
		case reflect.Slice:
			for i := range f.Len() {
				fill(f.Index(i))
			}
		}
	}
	fill(reflect.ValueOf(v).Elem())
	return v
}

var hostileStrings = []string{"", "", "plain", `<b x="1">&'+</b>`, "a\x00b", "line\r\nbreak\n", "€1,234.50 – ١٢٣٫٤٥", "0", "false"}

func TestProgramsMatchTextTemplate(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range differentialTemplates(t) {
		for range 200 {
			differential(t, c.tmpl, c.html, randomView(rng, hostileStrings))
		}
	}
}

// FuzzCompiledTemplates: for random views, every compiled template prints
// byte for byte what text/template prints.
func FuzzCompiledTemplates(f *testing.F) {
	f.Add(uint64(0), "", "")
	f.Add(uint64(1), "Tom & Jerry's <Diner>", "\r\n")
	f.Add(uint64(2), "+\x00\"", "\xff\xfe")
	templates := differentialTemplates(f)
	f.Fuzz(func(t *testing.T, seed uint64, a, b string) {
		strs := append([]string{a, b}, hostileStrings...)
		rng := rand.New(rand.NewPCG(seed, seed>>32))
		for _, c := range templates {
			differential(t, c.tmpl, c.html, randomView(rng, strs))
		}
	})
}

// The compiler refuses what it does not support, rather than guessing.
func TestCompileRefuses(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		`{{.Week | printf "%s"}}`,
		`{{printf "%s" .Week}}`,
		`{{with .Greeting}}{{.}}{{end}}`,
		`{{define "x"}}a{{end}}{{template "x"}}`,
		`{{range .Rows}}{{range $.Totals}}{{end}}{{end}}`,
		`{{"literal"}}`,
		`{{1}}`,
		`{{$x := .Week}}{{$x}}`,
		`{{if $x := .Week}}{{$x}}{{end}}`,
		`{{.Missing}}`,
		`{{.T}}`,
		`{{.T.Missing}}`,
		`{{.Week.Length}}`,
		`{{.Rows}}`,
		`{{.}}`,
		`{{$}}`,
		`{{range .Rows}}{{.}}{{end}}`,
		`{{range .Rows}}{{.Date.X}}{{end}}`,
		`{{range .Rows}}{{.Week}}{{end}}`,
		`{{if and .Empty .Week}}x{{end}}`,
		`{{if not .Empty .Week}}x{{end}}`,
		`{{range .Rows}}{{break}}{{end}}`,
		`{{range .Rows}}{{continue}}{{end}}`,
		`{{range $i, $r := .Rows}}{{$i.X}}{{end}}`,
		`{{range $r := .Rows}}{{else}}{{$r}}{{end}}`,
		`{{(.Week)}}`,
		`{{range .Week}}{{end}}`,
		`{{range .T}}{{end}}`,
	} {
		tmpl, err := texttemplate.New("t").Parse(src)
		if err != nil {
			t.Errorf("%s does not parse: %v", src, err)
			continue
		}
		if _, err := compileTemplate(tmpl, false); err == nil {
			t.Errorf("compileTemplate accepted %s", src)
		}
	}
}

// A template the compiler refuses is executed by text/template, the HTML
// one on the escaped view, so that it prints what it always printed.
func TestRefusedTemplateFallsBack(t *testing.T) {
	t.Parallel()
	v := &view{Week: "2026-W48", Greeting: `Hi <Tom> & "Jerry"`}
	for _, tt := range []struct {
		html bool
		want string
	}{
		{false, `2026-W48! Hi <Tom> & "Jerry"`},
		{true, `2026-W48! Hi &lt;Tom&gt; &amp; &#34;Jerry&#34;`},
	} {
		c := newCompiledTemplate(texttemplate.Must(texttemplate.New("t").Parse(`{{printf "%s!" .Week}} {{.Greeting}}`)), tt.html)
		if c.prog != nil {
			t.Fatal("printf compiled")
		}
		var s renderScratch
		if err := c.execute(&s, v); err != nil {
			t.Fatal(err)
		}
		if s.buf.String() != tt.want {
			t.Errorf("html %v: %q, want %q", tt.html, s.buf.String(), tt.want)
		}
	}
}

func TestWriteEscapedHTML(t *testing.T) {
	t.Parallel()
	var all strings.Builder
	for r := rune(0); r < 0x100; r++ {
		all.WriteRune(r)
	}
	for _, s := range []string{"", "plain", all.String(), `<<&&"'+>>`, "a\x00", "\xff<"} {
		var b bytes.Buffer
		writeEscapedHTML(&b, s)
		if b.String() != escapeHTML(s) {
			t.Errorf("writeEscapedHTML(%q) = %q, escapeHTML gives %q", s, b.String(), escapeHTML(s))
		}
	}
}
