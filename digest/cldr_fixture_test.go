package digest

import (
	"testing"
	"time"

	"github.com/weeklydigest/digest/internal/cldrfixture"
)

// TestCLDRFixture holds every shipped locale's amounts, row days and week
// ranges to what ICU writes from CLDR, byte for byte (invisible marks and
// spaces included): negative amounts, amounts past a million, two-, three-
// and zero-decimal currencies, weeks within a month, across months and
// across years.
func TestCLDRFixture(t *testing.T) {
	t.Parallel()
	fx, err := cldrfixture.Load(cldrfixture.Path(".."))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fixture from ICU %s (CLDR %s); tables from CLDR %s; corrections: %+v", fx.ICU, fx.CLDR, cldrVersion, fx.Corrections)
	date := func(s string) time.Time {
		d, err := time.Parse(time.DateOnly, s)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	locales := map[string]bool{}
	for _, c := range fx.Cases {
		f := localeFor(c.Locale)
		locales[f.id] = true
		var got string
		switch c.Kind {
		case "money":
			if got, err = FormatMoney(c.Locale, c.Minor, c.Currency); err != nil {
				t.Fatal(err)
			}
		case "day":
			got = f.formatDay(date(c.From))
		case "range":
			got = f.formatRange(date(c.From), date(c.To))
		default:
			t.Fatalf("case of kind %q", c.Kind)
		}
		if got != c.Want {
			t.Errorf("%s (%s) %s %d %s %s %s:\n got %+q\nwant %+q", c.Locale, f.id, c.Kind, c.Minor, c.Currency, c.From, c.To, got, c.Want)
		}
	}
	for id := range cldrLocales {
		if !locales[id] {
			t.Errorf("shipped locale %s has no case in the fixture", id)
		}
	}
}
