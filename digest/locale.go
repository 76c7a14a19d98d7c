package digest

import (
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/currency"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Languages are the languages digests are written in, English first: the
// fallback for an empty, malformed or unmatched locale. Adding one means a
// row in localeFormats, its messages in catalog.go and golden files (see
// the README, "Adding a language").
var Languages = []language.Tag{language.English, language.German, language.French, language.Spanish, language.Japanese, language.Arabic}

var matcher = language.NewMatcher(Languages)

// MatchLanguage returns the shipped language that best serves locale (a
// BCP 47 tag such as "de-AT"): German for de-AT, English for "" or for a
// language that is not shipped (pl-PL, zh-CN).
func MatchLanguage(locale string) language.Tag {
	if locale == "" {
		return language.English
	}
	matched.RLock()
	lang, ok := matched.m[locale]
	matched.RUnlock()
	if ok {
		return lang
	}
	lang = matchLanguage(locale)
	matched.Lock()
	if len(matched.m) >= maxMatched {
		clear(matched.m)
	}
	matched.m[locale] = lang
	matched.Unlock()
	return lang
}

// matched caches MatchLanguage: parsing and matching a locale costs a
// dozen allocations, for the handful of distinct locales of a run.
var matched = struct {
	sync.RWMutex
	m map[string]language.Tag
}{m: map[string]language.Tag{}}

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

// localeFormat is how one language writes money and dates: CLDR 46 data
// (common/main/<lang>.xml, numbers and the gregorian calendar, default
// numbering system) for the language's default region. Currency symbols
// come from golang.org/x/text/currency (also CLDR); x/text places them
// before the number in every language, so the placement (the currency
// pattern) is held here.
type localeFormat struct {
	decimal, group string
	minGrouping    int    // CLDR minimumGroupingDigits: es writes 1234 but 12.345
	minus          string // the minus sign, e.g. U+061C U+002D in Arabic
	symbolFirst    bool   // "¤#,##0.00" (en, ja) or "#,##0.00 ¤" (de, fr, es, ar)
	symbolSep      string // between number and a trailing symbol: U+00A0
	digits         string // "" for 0-9, else the ten digits of the numbering system
	rtl            bool

	weekdays [7]string  // abbreviated, Sunday first (format context)
	months   [12]string // abbreviated (format context)
	// day formats the day of a row (CLDR MMMEd); rng the week as a CLDR
	// yMMMd interval, within a month, across months or across years.
	day func(f *localeFormat, t time.Time) string
	rng func(f *localeFormat, first, last time.Time) string
}

var localeFormats = map[language.Tag]*localeFormat{
	language.English: {
		decimal: ".", group: ",", minGrouping: 1, minus: "-", symbolFirst: true,
		weekdays: [7]string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"},
		months:   [12]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"},
		day:      func(f *localeFormat, t time.Time) string { return f.wd(t) + " " + f.num(t.Day()) + " " + f.mon(t) },
		rng:      dayMonthYearRange("–", " – ", " "),
	},
	language.German: {
		decimal: ",", group: ".", minGrouping: 1, minus: "-", symbolSep: "\u00a0",
		weekdays: [7]string{"So.", "Mo.", "Di.", "Mi.", "Do.", "Fr.", "Sa."},
		months:   [12]string{"Jan.", "Feb.", "März", "Apr.", "Mai", "Juni", "Juli", "Aug.", "Sept.", "Okt.", "Nov.", "Dez."},
		day:      func(f *localeFormat, t time.Time) string { return f.wd(t) + ", " + f.num(t.Day()) + ". " + f.mon(t) },
		rng: func(f *localeFormat, a, b time.Time) string {
			d := func(t time.Time) string { return f.num(t.Day()) + ". " + f.mon(t) }
			switch {
			case a.Year() != b.Year():
				return d(a) + " " + f.num(a.Year()) + " – " + d(b) + " " + f.num(b.Year())
			case a.Month() != b.Month():
				return d(a) + " – " + d(b) + " " + f.num(b.Year())
			}
			return f.num(a.Day()) + ".–" + d(b) + " " + f.num(b.Year())
		},
	},
	language.French: {
		decimal: ",", group: "\u202f", minGrouping: 1, minus: "-", symbolSep: "\u00a0",
		weekdays: [7]string{"dim.", "lun.", "mar.", "mer.", "jeu.", "ven.", "sam."},
		months:   [12]string{"janv.", "févr.", "mars", "avr.", "mai", "juin", "juil.", "août", "sept.", "oct.", "nov.", "déc."},
		day:      func(f *localeFormat, t time.Time) string { return f.wd(t) + " " + f.num(t.Day()) + " " + f.mon(t) },
		rng:      dayMonthYearRange("–", " – ", " "),
	},
	language.Spanish: {
		decimal: ",", group: ".", minGrouping: 2, minus: "-", symbolSep: "\u00a0",
		weekdays: [7]string{"dom", "lun", "mar", "mié", "jue", "vie", "sáb"},
		months:   [12]string{"ene", "feb", "mar", "abr", "may", "jun", "jul", "ago", "sept", "oct", "nov", "dic"},
		day:      func(f *localeFormat, t time.Time) string { return f.wd(t) + ", " + f.num(t.Day()) + " " + f.mon(t) },
		rng:      dayMonthYearRange("–", " – ", " "),
	},
	language.Japanese: {
		decimal: ".", group: ",", minGrouping: 1, minus: "-", symbolFirst: true,
		weekdays: [7]string{"日", "月", "火", "水", "木", "金", "土"},
		months:   [12]string{"1月", "2月", "3月", "4月", "5月", "6月", "7月", "8月", "9月", "10月", "11月", "12月"},
		day:      func(f *localeFormat, t time.Time) string { return f.mon(t) + f.num(t.Day()) + "日(" + f.wd(t) + ")" },
		rng: func(f *localeFormat, a, b time.Time) string {
			ymd := func(t time.Time) string { return f.num(t.Year()) + "年" + f.mon(t) + f.num(t.Day()) + "日" }
			switch {
			case a.Year() != b.Year():
				return ymd(a) + "～" + ymd(b)
			case a.Month() != b.Month():
				return ymd(a) + "～" + f.mon(b) + f.num(b.Day()) + "日"
			}
			return ymd(a) + "～" + f.num(b.Day()) + "日"
		},
	},
	language.Arabic: {
		decimal: "\u066b", group: "\u066c", minGrouping: 1, minus: "\u061c-", symbolSep: "\u00a0",
		digits: "٠١٢٣٤٥٦٧٨٩", rtl: true,
		weekdays: [7]string{"الأحد", "الاثنين", "الثلاثاء", "الأربعاء", "الخميس", "الجمعة", "السبت"},
		months:   [12]string{"يناير", "فبراير", "مارس", "أبريل", "مايو", "يونيو", "يوليو", "أغسطس", "سبتمبر", "أكتوبر", "نوفمبر", "ديسمبر"},
		day:      func(f *localeFormat, t time.Time) string { return f.wd(t) + "، " + f.num(t.Day()) + " " + f.mon(t) },
		rng:      dayMonthYearRange("–", " – ", " "),
	},
}

// dayMonthYearRange is the CLDR yMMMd interval of the languages that write
// "d MMM y": "23–29 Nov 2026", "30 Nov – 6 Dec 2026", "28 Dec 2026 – 3 Jan 2027".
func dayMonthYearRange(sameMonth, wide, sp string) func(f *localeFormat, a, b time.Time) string {
	return func(f *localeFormat, a, b time.Time) string {
		dm := func(t time.Time) string { return f.num(t.Day()) + sp + f.mon(t) }
		switch {
		case a.Year() != b.Year():
			return dm(a) + sp + f.num(a.Year()) + wide + dm(b) + sp + f.num(b.Year())
		case a.Month() != b.Month():
			return dm(a) + wide + dm(b) + sp + f.num(b.Year())
		}
		return f.num(a.Day()) + sameMonth + dm(b) + sp + f.num(b.Year())
	}
}

func formatFor(lang language.Tag) *localeFormat {
	if f, ok := localeFormats[lang]; ok {
		return f
	}
	return localeFormats[language.English]
}

func (f *localeFormat) wd(t time.Time) string  { return f.weekdays[t.Weekday()] }
func (f *localeFormat) mon(t time.Time) string { return f.months[t.Month()-1] }

// num writes a small non-negative number (a day, a year) in the locale's
// digits, without grouping.
func (f *localeFormat) num(n int) string { return f.localDigits(strconv.Itoa(n)) }

func (f *localeFormat) localDigits(s string) string {
	if f.digits == "" {
		return s
	}
	return strings.Map(f.localDigit, s)
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

// weekRange formats the civil days of [from, to) in from's zone.
func (f *localeFormat) weekRange(from, to time.Time) string {
	return f.rng(f, from, to.In(from.Location()).AddDate(0, 0, -1))
}

// symbol returns the currency's symbol in lang, from CLDR via x/text
// ("€", "￥" in Japanese, "US$" in Arabic; the code where CLDR has none).
func symbol(lang language.Tag, code string) string {
	k := symbolKey{lang, code}
	symbols.RLock()
	s, ok := symbols.m[k]
	symbols.RUnlock()
	if ok {
		return s
	}
	s = currencySymbol(lang, code)
	symbols.Lock()
	symbols.m[k] = s
	symbols.Unlock()
	return s
}

type symbolKey struct {
	lang language.Tag
	code string
}

// symbols caches currencySymbol: x/text builds a printer and looks the
// symbol up for every call, tens of allocations per amount. A plain cache
// (codes are ISO 4217, a few hundred at most per language).
var symbols = struct {
	sync.RWMutex
	m map[symbolKey]string
}{m: map[symbolKey]string{}}

func currencySymbol(lang language.Tag, code string) string {
	u := currency.MustParseISO(code)
	s := message.NewPrinter(lang).Sprint(currency.Symbol(u.Amount(0)))
	// x/text writes "SYMBOL 0" (with local digits): keep the symbol.
	if i := strings.LastIndexByte(s, ' '); i > 0 {
		s = s[:i]
	}
	return s
}

// FormatMoney formats an amount in minor units as lang writes it (lang
// being one of Languages; others are written as English): the currency's
// own number of decimals (JPY 0, EUR 2, BHD 3), the language's separators
// and grouping, and its symbol where the language's CLDR currency pattern
// puts it: "€1,234.50" (en), "1.234,50 €" (de), "1 234,50 €" (fr, U+202F
// between thousands, U+00A0 before the symbol), "￥1,235" (ja). Integer
// arithmetic only.
func FormatMoney(lang language.Tag, minor int64, code string) (string, error) {
	var buf [128]byte
	b, err := appendMoney(buf[:0], lang, minor, code)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// appendMoney appends FormatMoney's amount to b: the callers build amounts
// in buffers on their stack and allocate only the strings.
func appendMoney(b []byte, lang language.Tag, minor int64, code string) ([]byte, error) {
	f := formatFor(lang)
	var nbuf [64]byte
	num, err := appendNumber(nbuf[:0], minor, code, f.decimal, f.group, f.minGrouping)
	if err != nil {
		return b, err
	}
	if minor < 0 {
		b = append(b, f.minus...)
	}
	sym := symbol(lang, code)
	if f.symbolFirst {
		b = append(b, sym...)
		// CLDR currencySpacing: a symbol ending in a letter ("BHD",
		// "CHF") is kept apart from the digits by a no-break space.
		if r, _ := utf8.DecodeLastRuneInString(sym); unicode.IsLetter(r) {
			b = append(b, "\u00a0"...)
		}
		return f.appendLocalDigits(b, num), nil
	}
	b = f.appendLocalDigits(b, num)
	b = append(b, f.symbolSep...)
	return append(b, sym...), nil
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
