package digest

import (
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/language"
)

// Languages are the languages digests are written in, English first: the
// fallback for an empty, malformed or unmatched locale. Adding one means
// its locales in internal/cldrgen, its messages in catalog.go and golden
// files (see the README, "Adding a language").
var Languages = []language.Tag{language.English, language.German, language.French, language.Spanish, language.Japanese, language.Arabic}

var matcher = language.NewMatcher(Languages)

// MatchLanguage returns the shipped language that best serves locale (a
// BCP 47 tag such as "de-AT"): German for de-AT, English for "" or for a
// language that is not shipped (pl-PL, zh-CN).
func MatchLanguage(locale string) language.Tag {
	if locale == "" {
		return language.English
	}
	return matched.get(locale, matchLanguage)
}

// matched caches MatchLanguage: parsing and matching a locale costs a
// dozen allocations, for the handful of distinct locales of a run.
var matched = localeCache[language.Tag]{m: map[string]language.Tag{}}

// localeCache maps locales (from the source, unchecked) to what they
// resolve to, bounded by maxMatched.
type localeCache[V any] struct {
	sync.RWMutex
	m map[string]V
}

// get returns the value of locale, resolving it the first time.
func (c *localeCache[V]) get(locale string, resolve func(string) V) V {
	c.RLock()
	v, ok := c.m[locale]
	c.RUnlock()
	if ok {
		return v
	}
	v = resolve(locale)
	c.Lock()
	if len(c.m) >= maxMatched {
		clear(c.m)
	}
	c.m[locale] = v
	c.Unlock()
	return v
}

// maxMatched bounds matched (locales come from the source, unchecked);
// past it the cache starts again.
const maxMatched = 1024

func matchLanguage(locale string) language.Tag {
	t, err := language.Parse(locale)
	if err != nil {
		return language.English
	}
	_, i, conf := matcher.Match(t)
	if conf == language.No {
		return language.English
	}
	return Languages[i]
}

//go:generate sh -c "cd internal/cldrgen && npm ci --no-audit --no-fund && go run . -cldr node_modules -out ../../cldr_tables.go"

// localeFormat is how one locale writes money and dates: CLDR data
// (cldr_tables.go, generated from the CLDR release cldrVersion by
// internal/cldrgen) for the locale's default numbering system and the
// gregorian calendar. Formats are keyed on the customer's full locale
// (de-CH, es-MX), falling back along CLDR's parent locales (es-MX →
// es-419 → es, de-LU → de); the words stay per language (catalog.go).
type localeFormat struct {
	id string // the CLDR locale id the data is from: "de-CH", "en" (which is en-US)

	digits                string // "" for 0-9, else the ten digits of the numbering system
	decimal, group, minus string // the currency decimal and group separators, the minus sign (U+061C U+002D in ar-EG)
	minGrouping           int    // CLDR minimumGroupingDigits: es writes 1234 but 12.345
	primary, secondary    int    // grouping sizes: 3, 3; en-IN 3, 2 (1,23,45,678.90)
	// The currency pattern's affixes, ¤ standing for the symbol: "¤" and
	// "-¤" (en), "¤\u00a0" and "¤-" (de-CH), "\u200f" and "\u00a0¤" (ar).
	posPrefix, posSuffix, negPrefix, negSuffix string
	symbols                                    map[string]string // by ISO code; others are written as their code

	months     [12]string // abbreviated (format context)
	weekdays   [7]string  // abbreviated, Sunday first (format context)
	dayPattern string     // CLDR MMMEd: a row's day
	// CLDR yMMMd intervals: the week within a month, across months, across years.
	rangeD, rangeM, rangeY string

	rtl   bool               // written right to left
	day   []dateToken        // dayPattern, parsed
	rng   [3]intervalPattern // rangeD, rangeM, rangeY, parsed
	words language.Tag       // the catalogue's words: the language, or a regional variant (es-419)
}

// rtlLanguages are the shipped languages written right to left.
var rtlLanguages = map[string]bool{"ar": true}

// regionalWords are the catalogue variants of a region: a locale whose
// chain of parents reaches one is written with its words (es-MX: es-419).
var regionalWords = map[string]language.Tag{"es-419": spanishLatinAmerica}

var spanishLatinAmerica = language.MustParse("es-419")

func init() {
	for id, f := range cldrLocales {
		base, _, _ := strings.Cut(id, "-")
		f.rtl = rtlLanguages[base]
		f.words = language.Make(base)
		for p := id; p != ""; p = parentLocale(p) {
			if t, ok := regionalWords[p]; ok {
				f.words = t
				break
			}
		}
		var err error
		if f.day, err = parseDatePattern(f.dayPattern); err != nil {
			panic(fmt.Sprintf("CLDR %s MMMEd: %v", id, err))
		}
		for i, p := range [3]string{f.rangeD, f.rangeM, f.rangeY} {
			if f.rng[i], err = parseInterval(p); err != nil {
				panic(fmt.Sprintf("CLDR %s yMMMd interval: %v", id, err))
			}
		}
	}
}

// parentLocale is CLDR's parent of a locale id: from parentLocales, else
// the id truncated ("de-CH" → "de"); "" for a bare language.
func parentLocale(id string) string {
	if p, ok := cldrParents[id]; ok {
		return p
	}
	if i := strings.LastIndexByte(id, '-'); i > 0 {
		return id[:i]
	}
	return ""
}

// localeFor returns the formats that serve locale (a BCP 47 tag): the
// locale's own when shipped (es-MX), else the nearest shipped one along
// CLDR's parents (es-AR → es-419, de-LU → de, en-US → en), and the
// language's own for a language without region; a language that is not
// shipped is written as English ("en"). From a cache (see matched).
func localeFor(locale string) *localeFormat { return formats.get(locale, resolveLocale) }

var formats = localeCache[*localeFormat]{m: map[string]*localeFormat{}}

func resolveLocale(locale string) *localeFormat {
	lang := MatchLanguage(locale)
	base, _ := lang.Base()
	fallback := cldrLocales[base.String()]
	t, err := language.Parse(locale)
	if err != nil {
		return fallback
	}
	if b, _ := t.Base(); b != base {
		return fallback // a language served by another's words (or English)
	}
	r, conf := t.Region()
	if conf != language.Exact {
		return fallback
	}
	for id := base.String() + "-" + r.String(); id != ""; id = parentLocale(id) {
		if f, ok := cldrLocales[id]; ok {
			return f
		}
	}
	return fallback
}

// formatFor returns the formats of a shipped language (its default region).
func formatFor(lang language.Tag) *localeFormat {
	base, _ := lang.Base()
	if f, ok := cldrLocales[base.String()]; ok {
		return f
	}
	return cldrLocales["en"]
}

// localDigit returns r, or the locale's digit for an ASCII digit r.
func (f *localeFormat) localDigit(r rune) rune {
	if r < '0' || r > '9' || f.digits == "" {
		return r
	}
	n := r - '0'
	for _, d := range f.digits {
		if n == 0 {
			return d
		}
		n--
	}
	return r
}

// formatDay writes t's civil day as a row shows it (CLDR MMMEd):
// "Mon, Nov 23" (en), "Mo., 23. Nov." (de), "lun 23 de nov" (es-MX).
func (f *localeFormat) formatDay(t time.Time) string {
	return string(f.appendDate(nil, f.day, t))
}

// weekRange formats the civil days of [from, to) in from's zone (a CLDR
// yMMMd interval): "Nov 23 – 29, 2026" (en), "23.–29. Nov. 2026" (de).
func (f *localeFormat) weekRange(from, to time.Time) string {
	return f.formatRange(from, to.In(from.Location()).AddDate(0, 0, -1))
}

// formatRange writes the interval of the civil days a and b: the pattern
// of their greatest difference, its first part for a and the rest for b.
func (f *localeFormat) formatRange(a, b time.Time) string {
	p := f.rng[0]
	switch {
	case a.Year() != b.Year():
		p = f.rng[2]
	case a.Month() != b.Month():
		p = f.rng[1]
	}
	out := f.appendDate(nil, p.first, a)
	return string(f.appendDate(out, p.second, b))
}

// dateToken is a field of a CLDR date pattern (a run of one pattern
// letter) or literal text (field 0).
type dateToken struct {
	field byte // 'd', 'E', 'M', 'y', or 0 for text
	width int
	text  string
}

// intervalPattern is a CLDR interval pattern split where its first field
// repeats: the first part is written for the start, the second for the end.
type intervalPattern struct{ first, second []dateToken }

// parseDatePattern reads the fields digest's patterns use (d, E, M or L, y)
// and literal text, quoted ('de') or not.
func parseDatePattern(p string) ([]dateToken, error) {
	var toks []dateToken
	text := func(s string) {
		if n := len(toks); n > 0 && toks[n-1].field == 0 {
			toks[n-1].text += s
			return
		}
		toks = append(toks, dateToken{text: s})
	}
	for i := 0; i < len(p); {
		c := p[i]
		switch {
		case c == '\'':
			if i+1 < len(p) && p[i+1] == '\'' {
				text("'")
				i += 2
				continue
			}
			end := strings.IndexByte(p[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("%q: unterminated quote", p)
			}
			if end > 0 {
				text(p[i+1 : i+1+end])
			}
			i += end + 2
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(p) && p[j] == c {
				j++
			}
			field := c
			switch c {
			case 'L':
				field = 'M'
			case 'c', 'e':
				field = 'E'
			case 'd', 'E', 'M', 'y':
			default:
				return nil, fmt.Errorf("%q: field %c not supported", p, c)
			}
			toks = append(toks, dateToken{field: field, width: j - i})
			i = j
		default:
			_, n := utf8.DecodeRuneInString(p[i:])
			text(p[i : i+n])
			i += n
		}
	}
	return toks, nil
}

func parseInterval(p string) (intervalPattern, error) {
	toks, err := parseDatePattern(p)
	if err != nil {
		return intervalPattern{}, err
	}
	seen := map[byte]bool{}
	for i, t := range toks {
		if t.field == 0 {
			continue
		}
		if seen[t.field] {
			return intervalPattern{first: toks[:i], second: toks[i:]}, nil
		}
		seen[t.field] = true
	}
	return intervalPattern{}, fmt.Errorf("%q: no repeated field", p)
}

func (f *localeFormat) appendDate(b []byte, toks []dateToken, t time.Time) []byte {
	for _, tok := range toks {
		switch tok.field {
		case 0:
			b = append(b, tok.text...)
		case 'd':
			b = f.appendNum(b, t.Day(), tok.width)
		case 'E':
			b = append(b, f.weekdays[t.Weekday()]...)
		case 'M':
			if tok.width >= 3 {
				b = append(b, f.months[t.Month()-1]...)
			} else {
				b = f.appendNum(b, int(t.Month()), tok.width)
			}
		case 'y':
			w := tok.width
			if w == 1 {
				w = 0
			}
			b = f.appendNum(b, t.Year(), w)
		}
	}
	return b
}

// appendNum appends n (non-negative) in the locale's digits, padded with
// zeros to width.
func (f *localeFormat) appendNum(b []byte, n, width int) []byte {
	var buf [20]byte
	return f.appendLocalDigits(b, appendPadded(buf[:0], n, width))
}

// symbol returns the currency's symbol in the locale (CLDR: "€", "US$" in
// en-GB, "$" for MXN in es-MX); its ISO code where CLDR has none, or for a
// currency cldrgen does not generate.
func (f *localeFormat) symbol(code string) string {
	if s, ok := f.symbols[code]; ok {
		return s
	}
	return code
}

// FormatMoney formats an amount in minor units as the CLDR locale serving
// locale writes it (see localeFor): the currency's own number of decimals
// (JPY 0, EUR 2, BHD 3), the locale's separators, grouping and digits, its
// currency pattern and the currency's symbol in it: "€1,234.50" (en),
// "1.234,50 €" (de, U+00A0 before the symbol), "$1,234.56" (es-MX, MXN),
// "CHF-12'345.67" (de-CH), "₹1,23,45,678.90" (en-IN), "\u200f1,234.50 د.إ.\u200f"
// (ar-AE). Integer arithmetic only.
func FormatMoney(locale string, minor int64, code string) (string, error) {
	var buf [128]byte
	b, err := appendMoney(buf[:0], localeFor(locale), minor, code)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// appendMoney appends FormatMoney's amount to b: the callers build amounts
// in buffers on their stack and allocate only the strings.
func appendMoney(b []byte, f *localeFormat, minor int64, code string) ([]byte, error) {
	var nbuf [64]byte
	num, err := appendNumber(nbuf[:0], minor, code, f.decimal, f.group, f.minGrouping, f.primary, f.secondary)
	if err != nil {
		return b, err
	}
	prefix, suffix := f.posPrefix, f.posSuffix
	if minor < 0 {
		prefix, suffix = f.negPrefix, f.negSuffix
	}
	sym := f.symbol(code)
	b = appendAffix(b, prefix, sym)
	// CLDR currencySpacing: a symbol whose side next to the digits is not
	// a symbol character ("CHF", "BHD") is kept apart from them by a
	// no-break space.
	if strings.HasSuffix(prefix, "¤") {
		if r, _ := utf8.DecodeLastRuneInString(sym); spaced(r) {
			b = append(b, "\u00a0"...)
		}
	}
	b = f.appendLocalDigits(b, num)
	if strings.HasPrefix(suffix, "¤") {
		if r, _ := utf8.DecodeRuneInString(sym); spaced(r) {
			b = append(b, "\u00a0"...)
		}
	}
	return appendAffix(b, suffix, sym), nil
}

// spaced reports whether currencySpacing's currencyMatch [[:^S:]&[:^Z:]]
// holds for r.
func spaced(r rune) bool { return !unicode.IsSymbol(r) && !unicode.In(r, unicode.Z) }

// appendAffix appends a pattern's affix with ¤ replaced by sym.
func appendAffix(b []byte, affix, sym string) []byte {
	for {
		before, after, ok := strings.Cut(affix, "¤")
		b = append(b, before...)
		if !ok {
			return b
		}
		b = append(b, sym...)
		affix = after
	}
}

// appendLocalDigits appends num (ASCII) to b in the locale's digits.
func (f *localeFormat) appendLocalDigits(b, num []byte) []byte {
	if f.digits == "" {
		return append(b, num...)
	}
	for _, c := range num {
		if c >= '0' && c <= '9' {
			b = utf8.AppendRune(b, f.localDigit(rune(c)))
		} else {
			b = append(b, c)
		}
	}
	return b
}
