// Command cldrgen writes digest's locale tables (digest/cldr_tables.go)
// from the cldr-json packages pinned in package.json: for each shipped
// locale, its default numbering system's digits and symbols, its currency
// pattern, the symbols of the currencies digest names, the abbreviated
// month and weekday names, the MMMEd pattern and the yMMMd interval
// patterns; CLDR's parent locales for the regions it ships under; and the
// number of decimals of those currencies. Run by go generate ./digest:
//
//	cd digest/internal/cldrgen && npm ci && go run . -cldr node_modules -out ../../cldr_tables.go
//
// The cldr-json "full" packages are resolved: each locale's files hold its
// inherited values too, so a shipped locale is read from its own files.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/format"
	"log"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// locales are the locales digest ships formats for: the languages (whose
// data is that of their default region: en is en-US, de de-DE, fr fr-FR,
// es es-ES, ja ja-JP, as CLDR's default content has it), the other regions
// of issue 21, and the parents (es-419, en-001) other regions fall back
// to. Adding a region: add it here and run go generate ./digest.
var locales = []string{
	"en", "en-001", "en-GB", "en-IN",
	"de", "de-AT", "de-CH",
	"fr", "fr-CA", "fr-CH",
	"es", "es-419", "es-MX",
	"ja",
	"ar", "ar-EG", "ar-SA", "ar-AE", "ar-KW", "ar-BH",
}

// currencies are those whose symbols are generated: the shipped regions'
// own and the most common others. Any other is written with its ISO code,
// which is also CLDR's fallback for a currency without a symbol.
var currencies = []string{
	"AED", "AUD", "BHD", "BRL", "CAD", "CHF", "CNY", "DKK", "EGP", "EUR", "GBP", "HKD",
	"INR", "JPY", "KWD", "MXN", "NOK", "NZD", "PLN", "SAR", "SEK", "SGD", "USD",
}

func main() {
	dir := flag.String("cldr", "node_modules", "the directory holding cldr-core, cldr-numbers-full and cldr-dates-full")
	out := flag.String("out", "../../cldr_tables.go", "the Go file to write")
	flag.Parse()
	src, err := generate(*dir)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		log.Fatal(err)
	}
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

type numbersFile struct {
	Main map[string]struct {
		Numbers map[string]json.RawMessage `json:"numbers"`
	} `json:"main"`
}

type symbolsJSON struct {
	Decimal         string `json:"decimal"`
	Group           string `json:"group"`
	MinusSign       string `json:"minusSign"`
	CurrencyDecimal string `json:"currencyDecimal"`
	CurrencyGroup   string `json:"currencyGroup"`
}

type currencyFormatsJSON struct {
	Standard string `json:"standard"`
}

type currenciesFile struct {
	Main map[string]struct {
		Numbers struct {
			Currencies map[string]struct {
				Symbol string `json:"symbol"`
			} `json:"currencies"`
		} `json:"numbers"`
	} `json:"main"`
}

type gregorianFile struct {
	Main map[string]struct {
		Dates struct {
			Calendars struct {
				Gregorian struct {
					Months struct {
						Format struct {
							Abbreviated map[string]string `json:"abbreviated"`
						} `json:"format"`
					} `json:"months"`
					Days struct {
						Format struct {
							Abbreviated map[string]string `json:"abbreviated"`
						} `json:"format"`
					} `json:"days"`
					DateTimeFormats struct {
						AvailableFormats map[string]string          `json:"availableFormats"`
						IntervalFormats  map[string]json.RawMessage `json:"intervalFormats"`
					} `json:"dateTimeFormats"`
				} `json:"gregorian"`
			} `json:"calendars"`
		} `json:"dates"`
	} `json:"main"`
}

type loc struct {
	name                   string
	digits                 string
	decimal, group, minus  string
	minGrouping            int
	primary, secondary     int
	posPrefix, posSuffix   string
	negPrefix, negSuffix   string
	symbols                map[string]string
	months                 [12]string
	weekdays               [7]string
	dayPattern             string
	rangeD, rangeM, rangeY string
}

func generate(dir string) ([]byte, error) {
	var version struct {
		Version string `json:"version"`
	}
	if err := readJSON(filepath.Join(dir, "cldr-core", "package.json"), &version); err != nil {
		return nil, err
	}
	var ns struct {
		Supplemental struct {
			NumberingSystems map[string]struct {
				Digits string `json:"_digits"`
			} `json:"numberingSystems"`
		} `json:"supplemental"`
	}
	if err := readJSON(filepath.Join(dir, "cldr-core", "supplemental", "numberingSystems.json"), &ns); err != nil {
		return nil, err
	}
	var parents struct {
		Supplemental struct {
			ParentLocales struct {
				ParentLocale map[string]string `json:"parentLocale"`
			} `json:"parentLocales"`
		} `json:"supplemental"`
	}
	if err := readJSON(filepath.Join(dir, "cldr-core", "supplemental", "parentLocales.json"), &parents); err != nil {
		return nil, err
	}
	var curData struct {
		Supplemental struct {
			CurrencyData struct {
				Fractions map[string]struct {
					Digits string `json:"_digits"`
				} `json:"fractions"`
			} `json:"currencyData"`
		} `json:"supplemental"`
	}
	if err := readJSON(filepath.Join(dir, "cldr-core", "supplemental", "currencyData.json"), &curData); err != nil {
		return nil, err
	}

	var locs []loc
	for _, name := range locales {
		l, err := readLocale(dir, name, ns.Supplemental.NumberingSystems)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		locs = append(locs, l)
	}

	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by digest/internal/cldrgen from CLDR %s (cldr-json); DO NOT EDIT.\n\n", version.Version)
	b.WriteString("package digest\n\n")
	fmt.Fprintf(&b, "// cldrVersion is the CLDR release the tables below are from.\nconst cldrVersion = %q\n\n", version.Version)
	b.WriteString("// cldrLocales are the shipped locales' formats, by CLDR locale id.\nvar cldrLocales = map[string]*localeFormat{\n")
	for _, l := range locs {
		fmt.Fprintf(&b, "%q: {\n", l.name)
		fmt.Fprintf(&b, "id: %q, digits: %q, decimal: %q, group: %q, minus: %q, minGrouping: %d, primary: %d, secondary: %d,\n",
			l.name, l.digits, l.decimal, l.group, l.minus, l.minGrouping, l.primary, l.secondary)
		fmt.Fprintf(&b, "posPrefix: %q, posSuffix: %q, negPrefix: %q, negSuffix: %q,\n", l.posPrefix, l.posSuffix, l.negPrefix, l.negSuffix)
		b.WriteString("symbols: map[string]string{")
		codes := make([]string, 0, len(l.symbols))
		for c := range l.symbols {
			codes = append(codes, c)
		}
		sort.Strings(codes)
		for _, c := range codes {
			fmt.Fprintf(&b, "%q: %q, ", c, l.symbols[c])
		}
		b.WriteString("},\n")
		fmt.Fprintf(&b, "months: %#v,\nweekdays: %#v,\n", l.months, l.weekdays)
		fmt.Fprintf(&b, "dayPattern: %q, rangeD: %q, rangeM: %q, rangeY: %q,\n},\n", l.dayPattern, l.rangeD, l.rangeM, l.rangeY)
	}
	b.WriteString("}\n\n")

	b.WriteString("// cldrParents are CLDR's parent locales (supplemental parentLocales) of\n// the shipped languages' regions; any other locale's parent is its id\n// truncated.\nvar cldrParents = map[string]string{\n")
	var kids []string
	for k, p := range parents.Supplemental.ParentLocales.ParentLocale {
		lang, _, _ := strings.Cut(k, "-")
		if p != "root" && slices.Contains(locales, lang) {
			kids = append(kids, k)
		}
	}
	sort.Strings(kids)
	for _, k := range kids {
		fmt.Fprintf(&b, "%q: %q,\n", k, parents.Supplemental.ParentLocales.ParentLocale[k])
	}
	b.WriteString("}\n\n")

	b.WriteString("// cldrCurrencyDigits are CLDR's decimals (supplemental currencyData) of the\n// currencies whose symbols are generated.\nvar cldrCurrencyDigits = map[string]int{\n")
	for _, c := range currencies {
		d := 2
		if f, ok := curData.Supplemental.CurrencyData.Fractions[c]; ok {
			n, err := strconv.Atoi(f.Digits)
			if err != nil {
				return nil, fmt.Errorf("currency %s: %w", c, err)
			}
			d = n
		}
		fmt.Fprintf(&b, "%q: %d,\n", c, d)
	}
	b.WriteString("}\n")
	return format.Source(b.Bytes())
}

func readLocale(dir, name string, numberingSystems map[string]struct {
	Digits string `json:"_digits"`
}) (loc, error) {
	l := loc{name: name, symbols: map[string]string{}}
	var nf numbersFile
	if err := readJSON(filepath.Join(dir, "cldr-numbers-full", "main", name, "numbers.json"), &nf); err != nil {
		return l, err
	}
	n := nf.Main[name].Numbers
	var nsName, minGrouping string
	if err := json.Unmarshal(n["defaultNumberingSystem"], &nsName); err != nil {
		return l, fmt.Errorf("defaultNumberingSystem: %w", err)
	}
	if err := json.Unmarshal(n["minimumGroupingDigits"], &minGrouping); err != nil {
		return l, fmt.Errorf("minimumGroupingDigits: %w", err)
	}
	l.minGrouping, _ = strconv.Atoi(minGrouping)
	if nsName != "latn" {
		l.digits = numberingSystems[nsName].Digits
	}
	var sym symbolsJSON
	if err := json.Unmarshal(n["symbols-numberSystem-"+nsName], &sym); err != nil {
		return l, fmt.Errorf("symbols: %w", err)
	}
	l.decimal, l.group, l.minus = sym.Decimal, sym.Group, sym.MinusSign
	if sym.CurrencyDecimal != "" {
		l.decimal = sym.CurrencyDecimal
	}
	if sym.CurrencyGroup != "" {
		l.group = sym.CurrencyGroup
	}
	var cf currencyFormatsJSON
	if err := json.Unmarshal(n["currencyFormats-numberSystem-"+nsName], &cf); err != nil {
		return l, fmt.Errorf("currencyFormats: %w", err)
	}
	if err := l.parseCurrencyPattern(cf.Standard); err != nil {
		return l, err
	}

	var cur currenciesFile
	if err := readJSON(filepath.Join(dir, "cldr-numbers-full", "main", name, "currencies.json"), &cur); err != nil {
		return l, err
	}
	for _, c := range currencies {
		s := cur.Main[name].Numbers.Currencies[c].Symbol
		if s == "" {
			s = c
		}
		l.symbols[c] = s
	}

	var g gregorianFile
	if err := readJSON(filepath.Join(dir, "cldr-dates-full", "main", name, "ca-gregorian.json"), &g); err != nil {
		return l, err
	}
	greg := g.Main[name].Dates.Calendars.Gregorian
	for i := range l.months {
		l.months[i] = greg.Months.Format.Abbreviated[strconv.Itoa(i+1)]
	}
	for i, d := range []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"} {
		l.weekdays[i] = greg.Days.Format.Abbreviated[d]
	}
	l.dayPattern = greg.DateTimeFormats.AvailableFormats["MMMEd"]
	var rng map[string]string
	if err := json.Unmarshal(greg.DateTimeFormats.IntervalFormats["yMMMd"], &rng); err != nil {
		return l, fmt.Errorf("intervalFormats yMMMd: %w", err)
	}
	l.rangeD, l.rangeM, l.rangeY = rng["d"], rng["M"], rng["y"]
	if l.dayPattern == "" || l.rangeD == "" || l.rangeM == "" || l.rangeY == "" {
		return l, fmt.Errorf("missing date patterns")
	}
	return l, nil
}

// parseCurrencyPattern reads a CLDR currency pattern ("¤#,##0.00",
// "¤ #,##0.00;¤-#,##0.00", "‏#,##0.00 ¤"): its affixes (¤ kept for the
// symbol, '-' replaced by the minus sign; an absent negative pattern is the
// minus sign before the positive one) and its grouping sizes.
func (l *loc) parseCurrencyPattern(p string) error {
	pos, neg, explicit := strings.Cut(p, ";")
	number := func(s string) (prefix, num, suffix string, err error) {
		i := strings.IndexAny(s, "#0")
		j := strings.LastIndexAny(s, "#0")
		if i < 0 {
			return "", "", "", fmt.Errorf("currency pattern %q: no number", p)
		}
		if strings.Contains(s, "'") {
			return "", "", "", fmt.Errorf("currency pattern %q: quoted affixes are not supported", p)
		}
		return s[:i], s[i : j+1], s[j+1:], nil
	}
	prefix, num, suffix, err := number(pos)
	if err != nil {
		return err
	}
	whole, _, _ := strings.Cut(num, ".")
	groups := strings.Split(whole, ",")
	switch len(groups) {
	case 2:
		l.primary, l.secondary = len(groups[1]), len(groups[1])
	case 3:
		l.primary, l.secondary = len(groups[2]), len(groups[1])
	default:
		return fmt.Errorf("currency pattern %q: grouping not supported", p)
	}
	minus := func(s string) string { return strings.ReplaceAll(s, "-", l.minus) }
	l.posPrefix, l.posSuffix = minus(prefix), minus(suffix)
	if !explicit {
		l.negPrefix, l.negSuffix = l.minus+l.posPrefix, l.posSuffix
		return nil
	}
	nprefix, _, nsuffix, err := number(neg)
	if err != nil {
		return err
	}
	l.negPrefix, l.negSuffix = minus(nprefix), minus(nsuffix)
	return nil
}
