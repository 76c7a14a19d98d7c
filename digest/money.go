// Amounts: formatting money in minor units with each currency's decimals
// and each locale's separators, and laying the amounts out in columns.

package digest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/currency"
)

// formatAmounts sets the amounts of v's rows (Amount, and AmountPadded:
// padded on the left with spaces to the widest, for the text part) and of
// its totals (Credits, Debits, Net) from d's, as FormatMoney writes them.
// They are all slices of one string: one allocation for every amount of
// the digest rather than one or two an amount. The amounts are first
// written one after the other (a), then laid out padded (b), then the
// fields are set by walking that layout again.
func formatAmounts(v *view, d *Digest, f *localeFormat) error {
	var abuf [512]byte
	var endsBuf [64]int
	a, ends := abuf[:0], endsBuf[:0] // ends[i]: where the i-th amount ends in a
	var err error
	for _, act := range d.Activity {
		if a, err = appendMoney(a, f, act.AmountMinor, act.Currency); err != nil {
			return err
		}
		ends = append(ends, len(a))
	}
	for _, t := range d.Totals {
		for _, minor := range [3]int64{t.CreditMinor, t.DebitMinor, t.NetMinor} {
			if a, err = appendMoney(a, f, minor, t.Currency); err != nil {
				return err
			}
			ends = append(ends, len(a))
		}
	}
	amount := func(i int) []byte {
		if i == 0 {
			return a[:ends[0]]
		}
		return a[ends[i-1]:ends[i]]
	}
	width := 0
	for i := range v.Rows {
		width = max(width, visibleWidth(amount(i)))
	}
	pad := func(i int) int { return width - visibleWidth(amount(i)) }

	var bbuf [1024]byte
	b := bbuf[:0]
	for i := range v.Rows {
		for range pad(i) {
			b = append(b, ' ')
		}
		b = append(b, amount(i)...)
	}
	rowsEnd := 0
	if len(v.Rows) > 0 {
		rowsEnd = ends[len(v.Rows)-1]
	}
	b = append(b, a[rowsEnd:]...) // the totals' amounts, as they are
	s := string(b)

	pos := 0
	next := func(n int) string { pos += n; return s[pos-n : pos] }
	for i := range v.Rows {
		n := len(amount(i))
		v.Rows[i].AmountPadded = s[pos : pos+pad(i)+n]
		next(pad(i))
		v.Rows[i].Amount = next(n)
	}
	for j := range v.Totals {
		k := len(v.Rows) + 3*j
		t := &v.Totals[j]
		t.Credits = next(len(amount(k)))
		t.Debits = next(len(amount(k + 1)))
		t.Net = next(len(amount(k + 2)))
	}
	return nil
}

// visibleWidth is the number of runes of b that take room: the bidi marks
// of CLDR's patterns (U+200F, U+200E, U+061C: format characters) take
// none, so Arabic amounts line up in the text part.
func visibleWidth(b []byte) int {
	n := 0
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if !unicode.Is(unicode.Cf, r) {
			n++
		}
		b = b[size:]
	}
	return n
}

// padRight pads each label with spaces to the widest, plus one.
func padRight(ls ...string) []string {
	w := 0
	for _, l := range ls {
		w = max(w, utf8.RuneCountInString(l))
	}
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l + strings.Repeat(" ", w+1-utf8.RuneCountInString(l))
	}
	return out
}

// ValidCurrency reports whether code is an ISO 4217 currency code known to
// golang.org/x/text/currency, written as exactly three upper-case letters.
func ValidCurrency(code string) bool {
	if len(code) != 3 {
		return false
	}
	for i := 0; i < len(code); i++ {
		if code[i] < 'A' || code[i] > 'Z' {
			return false
		}
	}
	_, err := currency.ParseISO(code)
	return err == nil
}

// ErrUnknownCurrency is wrapped by FormatAmount for a code ValidCurrency
// rejects.
var ErrUnknownCurrency = errors.New("unknown currency")

// FormatAmount formats an amount in minor units with the currency's own
// number of decimals (JPY 0, EUR 2, BHD 3, from CLDR via
// golang.org/x/text/currency), a comma between thousands and the code
// last: "1,234.56 EUR", "-12.50 EUR", "1,200 JPY". It uses integer
// arithmetic only.
func FormatAmount(minor int64, code string) (string, error) {
	n, err := formatNumber(minor, code, ".", ",", 1, 3, 3)
	if err != nil {
		return "", err
	}
	if minor < 0 {
		n = "-" + n
	}
	return n + " " + code, nil
}

// formatNumber writes the magnitude of an amount in minor units with the
// currency's own number of decimals (from CLDR via golang.org/x/text/currency),
// the given separators, and groups (of primary digits, then of secondary
// ones: 3 and 3, or 3 and 2 in en-IN) once the whole part has
// primary+minGrouping digits. Integer arithmetic only.
func formatNumber(minor int64, code, decimal, group string, minGrouping, primary, secondary int) (string, error) {
	var buf [64]byte
	b, err := appendNumber(buf[:0], minor, code, decimal, group, minGrouping, primary, secondary)
	return string(b), err
}

// appendNumber appends what formatNumber returns to b: the callers build
// an amount in a buffer on their stack and allocate only its string.
func appendNumber(b []byte, minor int64, code, decimal, group string, minGrouping, primary, secondary int) ([]byte, error) {
	if !ValidCurrency(code) {
		return b, fmt.Errorf("%w %q", ErrUnknownCurrency, code)
	}
	scale, _ := currency.Standard.Rounding(currency.MustParseISO(code))
	// The magnitude as uint64 also holds -math.MinInt64.
	mag := uint64(minor)
	if minor < 0 {
		mag = -mag
	}
	unit := uint64(1)
	for range scale {
		unit *= 10
	}
	var digits [20]byte
	whole := strconv.AppendUint(digits[:0], mag/unit, 10)
	grouped := len(whole) >= primary+minGrouping
	for i := range len(whole) {
		if left := len(whole) - i; grouped && i > 0 && (left == primary || left > primary && (left-primary)%secondary == 0) {
			b = append(b, group...)
		}
		b = append(b, whole[i])
	}
	if scale > 0 {
		frac := strconv.AppendUint(digits[:0], mag%unit, 10)
		b = append(b, decimal...)
		for range scale - len(frac) {
			b = append(b, '0')
		}
		b = append(b, frac...)
	}
	return b, nil
}
