package digest

import (
	"errors"
	"fmt"
	"time"
)

// ISOWeek is an ISO 8601 week, written YYYY-Www (for example 2026-W53).
//
// The year is the ISO week-numbering year, which differs from the calendar
// year for a few days around 1 January: 2026-12-31 lies in 2026-W53, and
// 2027-01-03 does too. The zero value is not a valid week.
type ISOWeek struct {
	Year int // ISO week-numbering year, 1 to 9999
	Week int // 1 to 52, or 53 in long years
}

// ErrInvalidWeek is wrapped by every error ParseISOWeek returns.
var ErrInvalidWeek = errors.New("invalid ISO week")

// ParseISOWeek parses the strict form YYYY-Www: four digits, "-W" in upper
// case, two digits. It accepts only weeks that exist: 2026-W53 does, 2025-W53
// does not; W00 never does.
func ParseISOWeek(s string) (ISOWeek, error) {
	const want = "want YYYY-Www, e.g. 2026-W07"
	if len(s) != 8 || s[4] != '-' || s[5] != 'W' {
		return ISOWeek{}, fmt.Errorf("%w %q: %s", ErrInvalidWeek, s, want)
	}
	year, ok1 := digits(s[0:4])
	week, ok2 := digits(s[6:8])
	if !ok1 || !ok2 {
		return ISOWeek{}, fmt.Errorf("%w %q: %s", ErrInvalidWeek, s, want)
	}
	if year < 1 {
		return ISOWeek{}, fmt.Errorf("%w %q: year must be 0001 to 9999", ErrInvalidWeek, s)
	}
	if n := WeeksInYear(year); week < 1 || week > n {
		return ISOWeek{}, fmt.Errorf("%w %q: ISO year %04d has weeks W01 to W%02d", ErrInvalidWeek, s, year, n)
	}
	return ISOWeek{Year: year, Week: week}, nil
}

func digits(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// WeeksInYear reports how many ISO weeks the ISO year has: 53 when 28
// December (always in the last week) falls in week 53, else 52.
func WeeksInYear(year int) int {
	_, w := time.Date(year, time.December, 28, 12, 0, 0, 0, time.UTC).ISOWeek()
	return w
}

// WeekOf returns the ISO week containing the instant t as seen on a wall
// clock in loc.
func WeekOf(t time.Time, loc *time.Location) ISOWeek {
	y, w := t.In(loc).ISOWeek()
	return ISOWeek{Year: y, Week: w}
}

// PreviousWeekOf returns the ISO week before the one containing t in loc:
// the week a Monday-morning run sends.
func PreviousWeekOf(t time.Time, loc *time.Location) ISOWeek {
	return WeekOf(t, loc).Prev()
}

// String formats w as YYYY-Www.
func (w ISOWeek) String() string { return fmt.Sprintf("%04d-W%02d", w.Year, w.Week) }

// IsZero reports whether w is the zero value.
func (w ISOWeek) IsZero() bool { return w == ISOWeek{} }

// monday returns the civil date (year, month, day) of the week's Monday.
// Civil dates are computed in UTC, where every day has 24 hours, and only
// then placed in a zone, so DST never shifts the day.
func (w ISOWeek) monday() time.Time {
	// 4 January is always in week 1.
	jan4 := time.Date(w.Year, time.January, 4, 0, 0, 0, 0, time.UTC)
	offset := (int(jan4.Weekday()) + 6) % 7 // days since Monday
	return jan4.AddDate(0, 0, -offset+7*(w.Week-1))
}

// Start returns Monday 00:00 of the week on a wall clock in loc.
func (w ISOWeek) Start(loc *time.Location) time.Time {
	m := w.monday()
	return time.Date(m.Year(), m.Month(), m.Day(), 0, 0, 0, 0, loc)
}

// End returns Monday 00:00 of the next week in loc: the exclusive end. In a
// zone with DST the week is then 167 or 169 hours long.
func (w ISOWeek) End(loc *time.Location) time.Time {
	m := w.monday().AddDate(0, 0, 7)
	return time.Date(m.Year(), m.Month(), m.Day(), 0, 0, 0, 0, loc)
}

// Contains reports whether t lies in [Start, End) in loc.
func (w ISOWeek) Contains(t time.Time, loc *time.Location) bool {
	return !t.Before(w.Start(loc)) && t.Before(w.End(loc))
}

// Prev returns the week before w.
func (w ISOWeek) Prev() ISOWeek {
	y, n := w.monday().AddDate(0, 0, -7).ISOWeek()
	return ISOWeek{Year: y, Week: n}
}

// Next returns the week after w.
func (w ISOWeek) Next() ISOWeek {
	y, n := w.monday().AddDate(0, 0, 7).ISOWeek()
	return ISOWeek{Year: y, Week: n}
}

// MarshalText implements encoding.TextMarshaler. The zero week, which
// ParseISOWeek would refuse, is an error rather than "0000-W00".
func (w ISOWeek) MarshalText() ([]byte, error) {
	if w.Week < 1 || w.Week > WeeksInYear(w.Year) || w.Year < 1 || w.Year > 9999 {
		return nil, fmt.Errorf("%w: %d-W%d does not exist", ErrInvalidWeek, w.Year, w.Week)
	}
	return []byte(w.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseISOWeek.
func (w *ISOWeek) UnmarshalText(b []byte) error {
	v, err := ParseISOWeek(string(b))
	if err != nil {
		return err
	}
	*w = v
	return nil
}
