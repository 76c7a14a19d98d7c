package digest

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// appendCanonical appends the canonical encoding of d to b: a JSON object
// of the digest with explicit names, fields in a fixed order, instants in
// UTC with nanoseconds (RFC 3339), as encoding/json writes it:
//
//	{"format":"digest-canonical-1","type":…,"version":…,"week":"2026-W48",
//	 "from":…,"to":…,"customer":{"id":…,"email":…,"name":…,"locale":…
//	 [,"time_zone":… only when set]},
//	 "activity":[{"occurred_at":…,"recorded_at":…,"kind":…,"amount_minor":…,
//	 "currency":…,"description":…},…],"totals":[{"currency":…,"count":…,
//	 "credit_minor":…,"debit_minor":…,"net_minor":…},…]}
//
// Written by hand rather than by json.Marshal of mirror structs, which
// cost a fingerprint about twenty allocations and a reflective walk; the
// bytes are the same (TestCanonicalIsEncodingJSON and FuzzCanonical hold
// it to encoding/json's output, which is the format's definition).
func (d *Digest) appendCanonical(b []byte) []byte {
	b = append(b, `{"format":`...)
	b = appendJSONString(b, canonicalFormat)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, d.Identity.Type)
	b = append(b, `,"version":`...)
	b = appendJSONString(b, d.Identity.Version)
	b = append(b, `,"week":`...)
	b = appendJSONWeek(b, d.Identity.Week)
	b = append(b, `,"from":`...)
	b = appendJSONTime(b, d.From)
	b = append(b, `,"to":`...)
	b = appendJSONTime(b, d.To)
	b = append(b, `,"customer":{"id":`...)
	b = appendJSONString(b, d.Customer.ID)
	b = append(b, `,"email":`...)
	b = appendJSONString(b, d.Customer.Email)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, d.Customer.Name)
	b = append(b, `,"locale":`...)
	b = appendJSONString(b, d.Customer.Locale)
	if d.Customer.TimeZone != "" {
		// Only when set: a digest without a zone keeps the canonical
		// form, and so the fingerprint, it had before the field existed.
		b = append(b, `,"time_zone":`...)
		b = appendJSONString(b, d.Customer.TimeZone)
	}
	b = append(b, `},"activity":[`...)
	for i, a := range d.Activity {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"occurred_at":`...)
		b = appendJSONTime(b, a.OccurredAt)
		b = append(b, `,"recorded_at":`...)
		b = appendJSONTime(b, a.RecordedAt)
		b = append(b, `,"kind":`...)
		b = appendJSONString(b, a.Kind)
		b = append(b, `,"amount_minor":`...)
		b = strconv.AppendInt(b, a.AmountMinor, 10)
		b = append(b, `,"currency":`...)
		b = appendJSONString(b, a.Currency)
		b = append(b, `,"description":`...)
		b = appendJSONString(b, a.Description)
		b = append(b, '}')
	}
	b = append(b, `],"totals":[`...)
	for i, t := range d.Totals {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"currency":`...)
		b = appendJSONString(b, t.Currency)
		b = append(b, `,"count":`...)
		b = strconv.AppendInt(b, int64(t.Count), 10)
		b = append(b, `,"credit_minor":`...)
		b = strconv.AppendInt(b, t.CreditMinor, 10)
		b = append(b, `,"debit_minor":`...)
		b = strconv.AppendInt(b, t.DebitMinor, 10)
		b = append(b, `,"net_minor":`...)
		b = strconv.AppendInt(b, t.NetMinor, 10)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// appendJSONWeek appends ISOWeek.String's "2026-W48" as a JSON string:
// its characters need no escaping.
func appendJSONWeek(b []byte, w ISOWeek) []byte {
	b = append(b, '"')
	b = appendWeek(b, w)
	return append(b, '"')
}

// appendWeek appends ISOWeek.String's "2026-W48" without formatting it
// through fmt.
func appendWeek(b []byte, w ISOWeek) []byte {
	if w.Year < 0 || w.Year > 9999 || w.Week < 0 || w.Week > 99 {
		return append(b, w.String()...) // not a week Validate accepts
	}
	b = appendPadded(b, w.Year, 4)
	b = append(b, "-W"...)
	return appendPadded(b, w.Week, 2)
}

// appendPadded appends the non-negative n with zeros on the left to width
// digits.
func appendPadded(b []byte, n, width int) []byte {
	var digits [20]byte
	d := strconv.AppendInt(digits[:0], int64(n), 10)
	for range width - len(d) {
		b = append(b, '0')
	}
	return append(b, d...)
}

// appendJSONTime appends t in UTC, RFC 3339 with nanoseconds, as a JSON
// string: its characters need no escaping.
func appendJSONTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendJSONString appends s as encoding/json writes a string (with its
// default HTML escaping): quotes and backslashes escaped, control
// characters as \n, \r, \t, \b, \f or \u00XX, <, > and & as \u003c,
// \u003e and \u0026, U+2028 and U+2029 escaped, each byte of invalid
// UTF-8 as \ufffd.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= ' ' && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
