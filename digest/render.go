package digest

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	texttemplate "text/template"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"golang.org/x/text/message/catalog"

	"github.com/weeklydigest/digest/templates"
)

// Rendered is a digest rendered for email: a one-line subject and the plain
// text and HTML alternatives of the body.
type Rendered struct {
	Subject string
	Text    string
	HTML    string
}

// Renderer renders digests with the templates of package templates, parsed
// once. It holds no mutable state but a cache of translated sentences, and
// is safe for concurrent use.
//
// Rendering is deterministic: the same digest gives the same bytes. Values
// are formatted in Go before they reach a template: dates in the zone of
// Digest.From, amounts with the currency's own number of decimals, and every
// customer-controlled string stripped of control characters (so a name with
// CR/LF cannot add lines to the subject or the text part). The HTML part is
// escaped by html/template's contextual analysis on top of that (done once,
// by NewRenderer: see parseHTML).
type Renderer struct {
	types map[string]typeTemplates    // by digest type; never written after NewRenderer
	cat   catalog.Catalog             // the messages of every shipped language
	langs map[language.Tag]*langWords // by shipped language; never written after NewRenderer

	weekMu sync.Mutex
	week   map[weekKey]*weekText // a cache; see weekWords
}

// langWords are the words of one language that no digest changes,
// translated once by NewRenderer rather than for every digest.
type langWords struct {
	lang   string // the language's tag, "de"
	labels labels // Subject, Intro, IntroEmpty and Footer left empty: they take values
	hello  string
	kinds  map[string]string // by known kind

	// printer translates the sentences that take values. A Printer is
	// read-only once made (each Sprintf copies it into a pooled state), so
	// one serves every digest of the language, concurrently.
	printer *message.Printer
	// helloName is msgHelloName split around the name, when the
	// translation only inserts it ({"Hello ", ","}): a greeting is then a
	// concatenation, not a catalogue lookup per digest. Else nil.
	helloName []string
	// transactions are msgTransactions for the counts below
	// maxCachedCount, translated once.
	transactions []string
}

// maxCachedCount bounds langWords.transactions: a week with more
// transactions in a currency is translated for its digest.
const maxCachedCount = 64

func newLangWords(cat catalog.Catalog, lang language.Tag) *langWords {
	p := printer(cat, lang)
	w := &langWords{
		lang:    lang.String(),
		printer: p,
		labels: labels{
			Heading: p.Sprintf(msgHeading), IntroHTML: p.Sprintf(msgIntroHTML), EmptyHTML: p.Sprintf(msgEmptyHTML),
			Date: p.Sprintf(msgDate), Activity: p.Sprintf(msgActivity), Amount: p.Sprintf(msgAmount),
			Totals: p.Sprintf(msgTotals), Currency: p.Sprintf(msgCurrency),
			MoneyIn: p.Sprintf(msgMoneyIn), MoneyOut: p.Sprintf(msgMoneyOut), Net: p.Sprintf(msgNet),
		},
		hello: p.Sprintf(msgHello),
		kinds: make(map[string]string, len(knownKinds)),
	}
	w.labels.ListSep = p.Sprintf(msgListSep)
	w.labels.Unsubscribe = p.Sprintf(msgUnsubscribe)
	w.labels.UnsubscribeLabel = p.Sprintf(msgLabel, w.labels.Unsubscribe)
	padded := padRight(p.Sprintf(msgLabel, w.labels.MoneyIn), p.Sprintf(msgLabel, w.labels.MoneyOut), p.Sprintf(msgLabel, w.labels.Net))
	w.labels.MoneyInPadded, w.labels.MoneyOutPadded, w.labels.NetPadded = padded[0], padded[1], padded[2]
	for k := range knownKinds {
		w.kinds[k] = p.Sprintf(msgKindPrefix + k)
	}
	w.helloName = splitAroundArg(p, msgHelloName)
	w.transactions = make([]string, maxCachedCount)
	for n := range w.transactions {
		w.transactions[n] = p.Sprintf(msgTransactions, n)
	}
	return w
}

// splitAroundArg returns the translation of key (a message of one %s)
// split around its argument, if the translation prints any argument as it
// is, once: checked with two different arguments. Else nil.
func splitAroundArg(p *message.Printer, key string) []string {
	const a, b = "\uE000a\uE000", "\uE000bb\uE000" // private use: in no translation
	before, after, ok := strings.Cut(p.Sprintf(key, a), a)
	if !ok || strings.Contains(after, a) || p.Sprintf(key, b) != before+b+after {
		return nil
	}
	return []string{before, after}
}

// greeting is msgHelloName for name.
func (w *langWords) greeting(name string) string {
	if w.helloName == nil {
		return w.printer.Sprintf(msgHelloName, name)
	}
	return w.helloName[0] + name + w.helloName[1]
}

// transactionCount is msgTransactions for n.
func (w *langWords) transactionCount(n int) string {
	if n >= 0 && n < len(w.transactions) {
		return w.transactions[n]
	}
	return w.printer.Sprintf(msgTransactions, n)
}

type typeTemplates struct {
	subject, text, html compiledTemplate
}

// compiledTemplate is a parsed template and, when the compiler supports
// every node of it, its program (render_program.go), which is what runs.
type compiledTemplate struct {
	tmpl *texttemplate.Template
	prog *program // nil: tmpl is executed
	html bool     // the HTML template: tmpl prints htmlView, prog escapes
}

func newCompiledTemplate(t *texttemplate.Template, html bool) compiledTemplate {
	// A template the compiler refuses is executed by text/template, as
	// before the compiler existed: correct, only slower.
	prog, _ := compileTemplate(t, html)
	return compiledTemplate{tmpl: t, prog: prog, html: html}
}

// execute writes the template for v into s's buffer.
func (c *compiledTemplate) execute(s *renderScratch, v *view) error {
	if c.prog != nil {
		c.prog.execute(&s.buf, &s.frame, v)
		return nil
	}
	if c.html {
		v = htmlView(v)
	}
	return c.tmpl.Execute(&s.buf, v)
}

// NewRenderer parses the templates of every digest type found in
// templates.FS.
func NewRenderer() (*Renderer, error) {
	names, err := fs.Glob(templates.FS, "*"+templates.SubjectSuffix)
	if err != nil {
		return nil, fmt.Errorf("templates: %w", err)
	}
	cat, err := newCatalog()
	if err != nil {
		return nil, fmt.Errorf("messages: %w", err)
	}
	r := &Renderer{types: make(map[string]typeTemplates, len(names)), cat: cat, langs: make(map[language.Tag]*langWords, len(Languages)), week: map[weekKey]*weekText{}}
	for _, lang := range Languages {
		r.langs[lang] = newLangWords(cat, lang)
	}
	for _, lang := range regionalWords {
		r.langs[lang] = newLangWords(cat, lang)
	}
	for _, n := range names {
		typ := strings.TrimSuffix(n, templates.SubjectSuffix)
		subject, err := texttemplate.ParseFS(templates.FS, templates.Subject(typ))
		if err != nil {
			return nil, fmt.Errorf("templates: %w", err)
		}
		text, err := texttemplate.ParseFS(templates.FS, templates.Text(typ))
		if err != nil {
			return nil, fmt.Errorf("templates: %w", err)
		}
		src, err := fs.ReadFile(templates.FS, templates.HTML(typ))
		if err != nil {
			return nil, fmt.Errorf("templates: %w", err)
		}
		html, err := parseHTML(templates.HTML(typ), string(src))
		if err != nil {
			return nil, fmt.Errorf("templates: %w", err)
		}
		r.types[typ] = typeTemplates{
			subject: newCompiledTemplate(subject, false),
			text:    newCompiledTemplate(text, false),
			html:    newCompiledTemplate(html, true),
		}
	}
	return r, nil
}

// defaultRenderer parses the embedded templates on first use; Render shares
// it. The parsed templates never change afterwards.
var defaultRenderer = sync.OnceValues(NewRenderer)

// Render renders d with a Renderer built once from the embedded templates.
func Render(d *Digest) (Rendered, error) {
	r, err := defaultRenderer()
	if err != nil {
		return Rendered{}, err
	}
	return r.Render(d)
}

// ErrUnknownType is returned by Render for a digest type without templates.
var ErrUnknownType = errors.New("no templates for digest type")

// Render renders d with the templates of its type (Identity.Type). A digest
// without activity renders too, saying there was none.
func (r *Renderer) Render(d *Digest) (Rendered, error) { return r.RenderFor(d, "") }

// RenderFor renders d for a recipient whose unsubscribe URI is
// unsubscribe: an http or https URI (the one-click URL of
// DIGEST_UNSUBSCRIBE_URL, the same the List-Unsubscribe header carries) is
// shown as a translated link in the text and HTML parts; "" or another
// scheme (mailto:) shows none.
func (r *Renderer) RenderFor(d *Digest, unsubscribe string) (Rendered, error) {
	t, ok := r.types[d.Identity.Type]
	if !ok {
		return Rendered{}, fmt.Errorf("render %q: %w", d.Identity.Type, ErrUnknownType)
	}
	v, err := r.newView(d)
	if err != nil {
		return Rendered{}, fmt.Errorf("render %s: %w", d.Identity.Customer, err)
	}
	v.Unsubscribe = visibleURL(unsubscribe)
	var out Rendered
	s := renderScratches.Get().(*renderScratch)
	defer putRenderScratch(s)
	b := &s.buf
	b.Reset()
	if err := t.subject.execute(s, v); err != nil {
		return Rendered{}, fmt.Errorf("render subject: %w", err)
	}
	out.Subject = clean(b.String())
	v.Subject = out.Subject
	// The text and the HTML parts, one after the other, make one string:
	// they are sent together, and it saves an allocation per digest.
	b.Reset()
	if err := t.text.execute(s, v); err != nil {
		return Rendered{}, fmt.Errorf("render text: %w", err)
	}
	n := b.Len()
	if err := t.html.execute(s, v); err != nil {
		return Rendered{}, fmt.Errorf("render html: %w", err)
	}
	body := b.String()
	out.Text, out.HTML = body[:n], body[n:]
	return out, nil
}

// renderScratch is what Render executes templates with: the buffer, reused
// so that each digest does not grow a new one to the size of its HTML, and
// a program's frame, which would otherwise cost an allocation per template.
type renderScratch struct {
	buf   bytes.Buffer
	frame frame
}

// renderScratches are reused renderScratch; a cache of memory only (see
// TestDigestHoldsNoOrchestration).
var renderScratches = sync.Pool{New: func() any { return new(renderScratch) }}

// maxPooledBuffer bounds what returns to renderScratches: a digest with
// unusually many rows does not pin its buffer.
const maxPooledBuffer = 256 << 10

func putRenderScratch(s *renderScratch) {
	s.frame = frame{} // holds no view once the digest is rendered
	if s.buf.Cap() <= maxPooledBuffer {
		renderScratches.Put(s)
	}
}

// view is what the templates see: every value formatted, translated and
// sanitised.
type view struct {
	Subject string // set once the subject is rendered, for the HTML title
	Lang    string // the language written, "de": the HTML's lang
	Dir     string // "ltr" or "rtl": the HTML's dir
	Start   string // "left", or "right" in a right-to-left language: align of text columns
	End     string // the other side: align of amounts
	Week    string // "2026-W48"
	Range   string // "23–29 Nov 2026", in the language's style
	Zone    string // the zone dates are shown in
	// Unsubscribe is the recipient's unsubscribe URL as the body links
	// it (visibleURL), or "".
	Unsubscribe string
	Greeting    string
	Empty       bool
	Rows        []viewRow
	Totals      []viewTotal
	Type        string
	Version     string
	T           labels // the fixed words, in the language
}

// labels are the fixed words of the templates, from the catalogue.
type labels struct {
	Subject                                          string
	Heading, Intro, IntroEmpty, IntroHTML, EmptyHTML string
	Date, Activity, Amount, Totals, Currency         string
	MoneyIn, MoneyOut, Net                           string // bare, for the HTML table heads
	MoneyInPadded, MoneyOutPadded, NetPadded         string // with the language's colon, padded to one width, for the text part
	ListSep                                          string // ", ", or the language's comma ("، ", "、")
	Unsubscribe, UnsubscribeLabel                    string // the link's text; with the language's colon, for the text part
	Footer                                           string
}

type viewRow struct {
	Date         string // "Mon 23 Nov"
	Kind         string // "Card payment"
	Description  string
	Amount       string // "-4.50 EUR"
	AmountPadded string // Amount padded on the left to the widest amount, for the text part
	Negative     bool
}

type viewTotal struct {
	Currency             string
	Count                int
	Transactions         string // "4 transactions", in the language
	Credits, Debits, Net string
}

func (r *Renderer) newView(d *Digest) (*view, error) {
	// Rows are shown in the customer's zone when the source gives one,
	// else in the run's (DIGEST_TZ, d.From's); the week's bounds, and so
	// its range, are always the run's.
	loc := d.From.Location()
	if tz := d.Customer.TimeZone; tz != "" {
		var err error
		if loc, err = customerLocation(tz); err != nil {
			return nil, err
		}
	}
	f := localeFor(d.Customer.Locale)
	words := r.words(f.words)
	v := &view{
		Lang:    words.lang,
		Dir:     "ltr",
		Start:   "left",
		End:     "right",
		Zone:    loc.String(),
		Empty:   len(d.Activity) == 0,
		Rows:    make([]viewRow, len(d.Activity)),
		Totals:  make([]viewTotal, len(d.Totals)),
		Type:    clean(d.Identity.Type),
		Version: clean(d.Identity.Version),
	}
	if f.rtl {
		v.Dir, v.Start, v.End = "rtl", "right", "left"
	}
	v.T = words.labels
	wk := r.weekWords(words.printer, f, d, newWeekKey(f, d, v.Zone, v.Type, v.Version))
	v.Week, v.Range = wk.week, wk.rng
	v.T.Subject, v.T.Intro, v.T.IntroEmpty, v.T.Footer = wk.subject, wk.intro, wk.introEmpty, wk.footer
	v.Greeting = words.hello
	if name := clean(d.Customer.Name); name != "" {
		v.Greeting = words.greeting(name)
	}
	for i, a := range d.Activity {
		v.Rows[i] = viewRow{
			Date:        wk.day(f, a.OccurredAt.In(loc)),
			Kind:        words.kind(a.Kind),
			Description: clean(a.Description),
			Negative:    a.AmountMinor < 0,
		}
	}
	for i, t := range d.Totals {
		v.Totals[i] = viewTotal{Currency: clean(t.Currency), Count: t.Count, Transactions: words.transactionCount(t.Count)}
	}
	if err := formatAmounts(v, d, f); err != nil {
		return nil, err
	}
	return v, nil
}

// words returns the fixed words of lang (a shipped language or a regional
// variant of its words), English for a language not shipped.
func (r *Renderer) words(lang language.Tag) *langWords {
	if w, ok := r.langs[lang]; ok {
		return w
	}
	return r.langs[language.English]
}

// kind names an activity kind in the language: from the catalogue for the
// kinds it knows, else humanKind's English form of the raw kind.
func (w *langWords) kind(kind string) string {
	if k, ok := w.kinds[kind]; ok {
		return k
	}
	return humanKind(kind)
}

// humanKind turns a kind such as "card_payment" into "Card payment".
func humanKind(kind string) string {
	switch kind {
	case "transfer_in":
		return "Transfer received"
	case "transfer_out":
		return "Transfer sent"
	}
	s := strings.TrimSpace(strings.NewReplacer("_", " ", "-", " ").Replace(clean(kind)))
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return "Activity"
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

// clean makes an untrusted string safe to place in a subject or a line of
// text: invalid UTF-8 becomes U+FFFD, control characters and line or
// paragraph separators become spaces, bidirectional overrides (which can
// make text read backwards) are dropped, and the ends are trimmed.
func clean(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		switch {
		case unicode.IsControl(r), r == '\u2028', r == '\u2029':
			return ' '
		case r == '\u061c', r == '\u200e', r == '\u200f', r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069':
			return -1
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}
