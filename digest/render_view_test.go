package digest

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// The words newView takes from langWords' caches are the catalogue's: the
// greeting split around the name, the transaction counts translated once.
// And every shipped language takes the fast path.
func TestLangWordsCachesAreTheCatalogues(t *testing.T) {
	t.Parallel()
	r, err := NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	for _, lang := range Languages {
		w := r.words(lang)
		if w.helloName == nil {
			t.Errorf("%s: the greeting is translated per digest", lang)
		}
		for _, name := range []string{"", "Ada", "%s", "%d %!", "{0}", `<b>"Tom" & Jerry's</b>`, "Zoë Ærø 山田", "\u00a0x\u202e"} {
			if got, want := w.greeting(name), w.printer.Sprintf(msgHelloName, name); got != want {
				t.Errorf("%s: greeting(%q) = %q, the catalogue says %q", lang, name, got, want)
			}
		}
		for _, n := range []int{-1, 0, 1, 2, 5, 11, 21, maxCachedCount - 1, maxCachedCount, 1000} {
			if got, want := w.transactionCount(n), w.printer.Sprintf(msgTransactions, n); got != want {
				t.Errorf("%s: transactionCount(%d) = %q, the catalogue says %q", lang, n, got, want)
			}
		}
	}
}

// formatAmounts lays out what FormatMoney and padding each amount would
// give: few and many rows (past its stack buffers), narrow and wide amounts,
// multi-byte digits and symbols, totals with and without rows.
func TestFormatAmounts(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	codes := []string{"EUR", "JPY", "BHD", "USD", "CHF"}
	for lang, f := range cldrLocales {
		for _, rows := range []int{0, 1, 2, 7, 80} {
			for _, totals := range []int{0, 1, 3} {
				d := &Digest{}
				for range rows {
					d.Activity = append(d.Activity, Activity{AmountMinor: (rng.Int64N(1e9) - 5e8) >> rng.IntN(30), Currency: codes[rng.IntN(len(codes))]})
				}
				for range totals {
					d.Totals = append(d.Totals, Total{Currency: codes[rng.IntN(len(codes))], CreditMinor: rng.Int64N(1e12), DebitMinor: -rng.Int64N(1e6), NetMinor: rng.Int64N(1e9) - 5e8})
				}
				v := &view{Rows: make([]viewRow, rows), Totals: make([]viewTotal, totals)}
				if err := formatAmounts(v, d, f); err != nil {
					t.Fatal(err)
				}
				width := 0
				for i, a := range d.Activity {
					want := mustFormatMoney(t, lang, a.AmountMinor, a.Currency)
					if v.Rows[i].Amount != want {
						t.Fatalf("%s row %d: %q, want %q", lang, i, v.Rows[i].Amount, want)
					}
					width = max(width, utf8.RuneCountInString(strings.Map(dropFormat, want)))
				}
				for i, r := range v.Rows {
					if want := strings.Repeat(" ", width-utf8.RuneCountInString(strings.Map(dropFormat, r.Amount))) + r.Amount; r.AmountPadded != want {
						t.Fatalf("%s row %d padded: %q, want %q", lang, i, r.AmountPadded, want)
					}
				}
				for i, tt := range d.Totals {
					got := [3]string{v.Totals[i].Credits, v.Totals[i].Debits, v.Totals[i].Net}
					want := [3]string{mustFormatMoney(t, lang, tt.CreditMinor, tt.Currency), mustFormatMoney(t, lang, tt.DebitMinor, tt.Currency), mustFormatMoney(t, lang, tt.NetMinor, tt.Currency)}
					if got != want {
						t.Fatalf("%s total %d: %q, want %q", lang, i, got, want)
					}
				}
			}
		}
	}
	// An unknown currency fails as FormatMoney does.
	d := &Digest{Activity: []Activity{{AmountMinor: 1, Currency: "EUR"}}, Totals: []Total{{Currency: "XXQ"}}}
	if err := formatAmounts(&view{Rows: make([]viewRow, 1), Totals: make([]viewTotal, 1)}, d, cldrLocales["en"]); !errors.Is(err, ErrUnknownCurrency) {
		t.Errorf("formatAmounts with an unknown currency: %v", err)
	}
}

// dropFormat drops the invisible format characters (bidi marks) that take
// no room in a padded column.
func dropFormat(r rune) rune {
	if unicode.Is(unicode.Cf, r) {
		return -1
	}
	return r
}

func mustFormatMoney(t *testing.T, lang string, minor int64, code string) string {
	t.Helper()
	s, err := FormatMoney(lang, minor, code)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A row's date comes from the week's cached days: the same text as
// formatting it, for every half hour of a week across a DST change, in
// zones far from UTC, in every language; and no time inside the week
// misses the cache.
func TestWeekDaysAreTheFormatted(t *testing.T) {
	t.Parallel()
	r, err := NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	for _, zone := range []string{"UTC", "Europe/Berlin", "America/St_Johns", "Pacific/Kiritimati", "Pacific/Pago_Pago", "Australia/Lord_Howe"} {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		for _, wk := range []ISOWeek{{2026, 13}, {2026, 14}, {2026, 44}, {2026, 53}, {2027, 1}} {
			d := &Digest{From: wk.Start(loc), To: wk.End(loc)}
			d.Identity.Week = wk
			for lang, f := range cldrLocales {
				w := r.weekWords(r.words(f.words).printer, f, d, newWeekKey(f, d, zone, "t", "v1"))
				for at := d.From.Add(-24 * time.Hour); at.Before(d.To.Add(24 * time.Hour)); at = at.Add(30 * time.Minute) {
					in := at.In(loc)
					if got, want := w.day(f, in), f.formatDay(in); got != want {
						t.Fatalf("%s %s %s: %s is %q, want %q", zone, wk, lang, in, got, want)
					}
					if !at.Before(d.From) && at.Before(d.To) && !cached(w, in) {
						t.Errorf("%s %s %s: %s is not among the week's days", zone, wk, lang, in)
					}
				}
			}
		}
	}
}

func cached(w *weekText, t time.Time) bool {
	_, ok := w.cachedDay(t)
	return ok
}
