package digest

import (
	"bytes"
	htmltemplate "html/template"
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
