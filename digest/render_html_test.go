package digest

import (
	"bytes"
	"fmt"
	htmltemplate "html/template"
	"reflect"
	"strings"
	"testing"
)

// escapeHTML prints what html/template prints for a string in every
// context parseHTML keeps: text, a quoted attribute value, RCDATA.
func TestEscapeHTMLIsHTMLTemplates(t *testing.T) {
	t.Parallel()
	var all strings.Builder
	for r := rune(0); r < 0x80; r++ {
		all.WriteRune(r)
	}
	tmpl := htmltemplate.Must(htmltemplate.New("t").Parse(`<title>{{.}}</title><p title="{{.}}" class='{{.}}'>{{.}}</p>`))
	for _, s := range []string{all.String(), `Tom <b>&</b> Jerry's "Diner" + 1`, "€1,234.50 – ￥1,235 – ١٢٣٫٤٥ – \u00a0\u202f\u2028", "&amp; &#39; <!-- x -->"} {
		var b bytes.Buffer
		if err := tmpl.Execute(&b, s); err != nil {
			t.Fatal(err)
		}
		e := escapeHTML(s)
		want := `<title>` + e + `</title><p title="` + e + `" class='` + e + `'>` + e + `</p>`
		if b.String() != want {
			t.Errorf("for %q html/template printed\n%s\nescapeHTML gives\n%s", s, b.String(), want)
		}
	}
}

// A template that prints a value where html/template would escape it
// otherwise than as HTML text (a URL, a script, a style, an unquoted
// attribute) is refused when the renderer is built.
func TestParseHTMLRefusesOtherContexts(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		`<a href="{{.Week}}">x</a>`,
		`<a href="/w?week={{.Week}}">x</a>`,
		`<script>var w = {{.Week}};</script>`,
		`<p style="color: {{.Week}}">x</p>`,
		`<p title={{.Week}}>x</p>`,
		`<p onclick="f('{{.Week}}')">x</p>`,
		`{{if .Empty}}<img src="{{.Week}}">{{end}}`,
		`{{range .Rows}}<a href="{{.Description}}">x</a>{{end}}`,
	} {
		if _, err := parseHTML("t.html", src); err == nil {
			t.Errorf("parseHTML accepted %s", src)
		}
	}
	if _, err := parseHTML("t.html", `<p title="{{.Week}}">{{.Range}}{{range .Rows}}<b>{{.Kind}}</b>{{end}}</p>`); err != nil {
		t.Errorf("parseHTML refused text and a quoted attribute: %v", err)
	}
}

// TestHTMLViewEscapesEveryString guards htmlView's hand-written field list:
// every string the HTML template could print (in view, its labels, rows and
// totals) must come out escaped. A field added to view and printed in the
// HTML template without being added to htmlView would otherwise reach the
// customer's mail client unescaped.
func TestHTMLViewEscapesEveryString(t *testing.T) {
	t.Parallel()
	const hostile = `<b x="1">&'`
	v := &view{Rows: make([]viewRow, 1), Totals: make([]viewTotal, 1)}
	fill(reflect.ValueOf(v).Elem(), hostile)
	h := htmlView(v)
	var unescaped []string
	walkStrings(reflect.ValueOf(h).Elem(), "view", func(path, s string) {
		if strings.ContainsAny(s, `<>"'&`) && s != escapeHTML(hostile) || s == hostile {
			unescaped = append(unescaped, path)
		}
	})
	if len(unescaped) > 0 {
		t.Fatalf("htmlView leaves these fields unescaped: %v", unescaped)
	}
	// The original is left as it was (the text part uses it).
	if v.Greeting != hostile {
		t.Fatalf("htmlView changed its argument: %q", v.Greeting)
	}
}

// fill sets every string reachable in v (structs, slices' elements) to s.
func fill(v reflect.Value, s string) {
	walk(v, func(f reflect.Value) { f.SetString(s) })
}

func walkStrings(v reflect.Value, path string, f func(path, s string)) {
	switch v.Kind() {
	case reflect.String:
		f(path, v.String())
	case reflect.Struct:
		for i := range v.NumField() {
			walkStrings(v.Field(i), path+"."+v.Type().Field(i).Name, f)
		}
	case reflect.Slice:
		for i := range v.Len() {
			walkStrings(v.Index(i), fmt.Sprintf("%s[%d]", path, i), f)
		}
	}
}

func walk(v reflect.Value, f func(reflect.Value)) {
	switch v.Kind() {
	case reflect.String:
		f(v)
	case reflect.Struct:
		for i := range v.NumField() {
			walk(v.Field(i), f)
		}
	case reflect.Slice:
		for i := range v.Len() {
			walk(v.Index(i), f)
		}
	}
}

// With a one-click unsubscribe URL the body shows it, translated, in both
// parts: in the HTML exactly as html/template would print it in an href
// (filtered, normalised, escaped), whatever the URL holds; a mailto: URI or
// none shows no link.
func TestUnsubscribeLinkVisible(t *testing.T) {
	t.Parallel()
	r, err := NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	week, err := ParseISOWeek("2026-W48")
	if err != nil {
		t.Fatal(err)
	}
	render := func(locale, uri string) Rendered {
		d, err := Build(Record{Customer: Customer{ID: "c1", Email: "a@example.com", Locale: locale}}, Spec{Week: week, Type: "weekly_activity", Version: "v1"})
		if err != nil {
			t.Fatal(err)
		}
		out, err := r.RenderFor(&d, uri)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	href := htmltemplate.Must(htmltemplate.New("a").Parse(`<a href="{{.}}">`))
	for _, tt := range []struct{ locale, link, colon string }{
		{"en-US", "Unsubscribe from this weekly summary", ": "},
		{"de-DE", "Diese wöchentliche Übersicht abbestellen", ": "},
		{"fr-FR", "Se désabonner de ce résumé hebdomadaire", "\u202f: "},
		{"es-MX", "Cancelar la suscripción a este resumen semanal", ": "},
		{"ja-JP", "このお知らせの配信を停止する", "： "},
		{"ar-EG", "إلغاء الاشتراك في هذه الخلاصة الأسبوعية", ": "},
	} {
		for _, uri := range []string{"https://bank.example/u/u1~AbC-_x", `https://bank.example/u/a"b<c>d'e&f+g h%41é`, "HTTPS://bank.example/u/x?y=1&z=2"} {
			out := render(tt.locale, uri)
			if !strings.Contains(out.Text, tt.link+tt.colon+visibleURL(uri)+"\n") {
				t.Errorf("%s %s: text lacks the link:\n%s", tt.locale, uri, out.Text)
			}
			var a strings.Builder
			if err := href.Execute(&a, uri); err != nil {
				t.Fatal(err)
			}
			if want := strings.TrimSuffix(a.String(), ">") + ` style="color:#57606a;text-decoration:underline;">` + tt.link + "</a>"; !strings.Contains(out.HTML, want) {
				t.Errorf("%s %s: HTML lacks %s:\n%s", tt.locale, uri, want, out.HTML)
			}
		}
		for _, none := range []string{"", "mailto:unsubscribe@bank.example?subject=u1~x", "javascript:alert(1)"} {
			if out := render(tt.locale, none); strings.Contains(out.HTML, "<a ") || strings.Contains(out.Text, tt.link) {
				t.Errorf("%s %q: a link is shown", tt.locale, none)
			}
		}
	}
}
