// Package cldrfixture reads digest/testdata/cldr/fixture.json: what CLDR,
// through ICU (Node.js's Intl), writes for every locale digest ships,
// written by digest/testdata/cldr/gen.mjs. For tests.
package cldrfixture

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Fixture is the file: the versions it was made with, where it follows
// CLDR rather than ICU, and its cases.
type Fixture struct {
	ICU, CLDR   string
	Corrections []struct {
		Locales []string
		Kind    string
		Reason  string
	}
	Cases []Case

	want map[string]string
}

// Case is one expected string: an amount ("money": Currency, Minor), a
// row's day ("day": From) or a week's range ("range": From, To).
type Case struct {
	Locale, Kind, Currency string
	Minor                  int64
	From, To               string
	Want                   string
}

// Path is the fixture's path under the repository root.
func Path(root string) string {
	return filepath.Join(root, "digest", "testdata", "cldr", "fixture.json")
}

// Load reads the fixture at path.
func Load(path string) (*Fixture, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f Fixture
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.want = make(map[string]string, len(f.Cases))
	for _, c := range f.Cases {
		f.want[key(c.Locale, c.Kind, c.Currency, c.Minor, c.From, c.To)] = c.Want
	}
	return &f, nil
}

func key(locale, kind, currency string, minor int64, from, to string) string {
	return fmt.Sprint(locale, "|", kind, "|", currency, "|", minor, "|", from, "|", to)
}

// Money is the amount of minor units of currency as locale writes it.
func (f *Fixture) Money(locale, currency string, minor int64) (string, bool) {
	s, ok := f.want[key(locale, "money", currency, minor, "", "")]
	return s, ok
}

// Day is a row's day (2026-11-24) as locale writes it.
func (f *Fixture) Day(locale, day string) (string, bool) {
	s, ok := f.want[key(locale, "day", "", 0, day, "")]
	return s, ok
}

// Range is the week of the days from and to as locale writes it.
func (f *Fixture) Range(locale, from, to string) (string, bool) {
	s, ok := f.want[key(locale, "range", "", 0, from, to)]
	return s, ok
}
