package digest

import (
	"testing"
	"time"
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

func TestPadLeft(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		s     string
		width int
		want  string
	}{{"€1.00", 5, "€1.00"}, {"€1.00", 7, "  €1.00"}, {"", 2, "  "}, {"abc", 1, "abc"}, {"١٫٠٠", 6, "  ١٫٠٠"}} {
		if got := padLeft(tt.s, tt.width); got != tt.want {
			t.Errorf("padLeft(%q, %d) = %q, want %q", tt.s, tt.width, got, tt.want)
		}
	}
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
			for _, lang := range Languages {
				f := formatFor(lang)
				w := r.weekWords(r.words(lang).printer, f, d, newWeekKey(lang, d, "t", "v1"))
				for at := d.From.Add(-24 * time.Hour); at.Before(d.To.Add(24 * time.Hour)); at = at.Add(30 * time.Minute) {
					in := at.In(loc)
					if got, want := w.day(f, in), f.day(f, in); got != want {
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
