package digest_test

import (
	"context"
	"html"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/cldrfixture"
	"github.com/weeklydigest/digest/snapshot"
)

// TestRegionsWeekMatchesCLDR renders 2026-W48 for testdata/regions.jsonl,
// a customer in each shipped region (most in their own time zone), and
// holds what each reads to the CLDR fixture (testdata/cldr/fixture.json,
// from ICU): every row's amount and day (in the customer's zone), the
// totals' credits and debits, the week's range in subject, text and HTML;
// and no ISO week token anywhere.
func TestRegionsWeekMatchesCLDR(t *testing.T) {
	t.Parallel()
	fx, err := cldrfixture.Load(cldrfixture.Path(".."))
	if err != nil {
		t.Fatal(err)
	}
	src, err := snapshot.OpenFile(filepath.Join("testdata", "regions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	week, err := digest.ParseISOWeek("2026-W48")
	if err != nil {
		t.Fatal(err)
	}
	spec := digest.Spec{Week: week, Location: time.UTC, Type: "weekly_activity", Version: "v1"}
	r, err := digest.NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	isoWeek := regexp.MustCompile(`\d{4}-W\d{2}`)
	regions := map[string]bool{}
	for rec, err := range src.Records(context.Background(), digest.SourceQuery{Week: week, Location: time.UTC}) {
		if err != nil {
			t.Fatal(err)
		}
		d, err := digest.Build(rec, spec)
		if err != nil {
			t.Fatal(err)
		}
		out, err := r.Render(&d)
		if err != nil {
			t.Fatal(err)
		}
		locale := rec.Customer.Locale
		regions[locale] = true
		t.Run(locale, func(t *testing.T) {
			must := func(s string, ok bool) string {
				t.Helper()
				if !ok {
					t.Fatal("a value the CLDR fixture lacks")
				}
				return s
			}
			loc := time.UTC
			if rec.Customer.TimeZone != "" {
				if loc, err = time.LoadLocation(rec.Customer.TimeZone); err != nil {
					t.Fatal(err)
				}
			}
			rng := must(fx.Range(locale, "2026-11-23", "2026-11-29"))
			for _, part := range []string{out.Subject, out.Text, out.HTML} {
				if m := isoWeek.FindString(part); m != "" {
					t.Errorf("ISO week token %q in:\n%s", m, part)
				}
				if !strings.Contains(part, rng) && !strings.Contains(part, html.EscapeString(rng)) {
					t.Errorf("the week's range %+q is not in:\n%s", rng, part)
				}
			}
			var wants []string
			for _, a := range d.Activity {
				wants = append(wants,
					must(fx.Money(locale, a.Currency, a.AmountMinor)),
					must(fx.Day(locale, a.OccurredAt.In(loc).Format(time.DateOnly))))
			}
			for _, tot := range d.Totals {
				wants = append(wants, must(fx.Money(locale, tot.Currency, tot.CreditMinor)))
				if tot.DebitMinor != 0 {
					wants = append(wants, must(fx.Money(locale, tot.Currency, tot.DebitMinor)))
				}
			}
			for _, w := range wants {
				if !strings.Contains(out.Text, w) {
					t.Errorf("text lacks %+q:\n%s", w, out.Text)
				}
				if h := html.EscapeString(w); !strings.Contains(out.HTML, h) {
					t.Errorf("HTML lacks %+q:\n%s", h, out.HTML)
				}
			}
			if zone := loc.String(); !strings.Contains(out.Text, zone) {
				t.Errorf("the footer does not name the zone %s:\n%s", zone, out.Text)
			}
		})
	}
	for _, l := range []string{"en-US", "en-GB", "en-IN", "de-DE", "de-AT", "de-CH", "fr-FR", "fr-CA", "fr-CH", "es-ES", "es-MX", "ja-JP", "ar-EG", "ar-SA", "ar-AE", "ar-KW", "ar-BH"} {
		if !regions[l] {
			t.Errorf("no customer in %s", l)
		}
	}
}
