package digest_test

import (
	"errors"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the DST cases must not depend on the machine's zoneinfo

	"github.com/weeklydigest/digest/digest"
)

// The oracle below computes ISO weeks from the ISO 8601 rule with integer
// arithmetic on civil dates only: no time.Time and no time.ISOWeek.

func isLeap(y int) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

func daysIn(y, m int) int {
	switch m {
	case 2:
		if isLeap(y) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// oracleWeekday returns 1 (Monday) to 7 (Sunday), by Zeller's congruence.
func oracleWeekday(y, m, d int) int {
	if m < 3 {
		m += 12
		y--
	}
	h := (d + 13*(m+1)/5 + y + y/4 - y/100 + y/400) % 7 // 0 = Saturday
	return (h+5)%7 + 1
}

func oracleOrdinal(y, m, d int) int {
	n := d
	for i := 1; i < m; i++ {
		n += daysIn(y, i)
	}
	return n
}

// oracleWeeks: a year has 53 weeks when it starts on a Thursday, or on a
// Wednesday in a leap year.
func oracleWeeks(y int) int {
	wd := oracleWeekday(y, 1, 1)
	if wd == 4 || wd == 3 && isLeap(y) {
		return 53
	}
	return 52
}

// oracleWeek is the ISO 8601 rule: week = (ordinal - weekday + 10) / 7,
// moved into the previous or next ISO year when it falls outside 1..N.
func oracleWeek(y, m, d int) digest.ISOWeek {
	w := (oracleOrdinal(y, m, d) - oracleWeekday(y, m, d) + 10) / 7
	switch {
	case w < 1:
		return digest.ISOWeek{Year: y - 1, Week: oracleWeeks(y - 1)}
	case w > oracleWeeks(y):
		return digest.ISOWeek{Year: y + 1, Week: 1}
	}
	return digest.ISOWeek{Year: y, Week: w}
}

func TestWeekOfEveryDay(t *testing.T) {
	t.Parallel()
	y, m, d := 1990, 1, 1
	days := 0
	for y <= 2100 {
		want := oracleWeek(y, m, d)
		for _, hour := range []int{0, 23} {
			at := time.Date(y, time.Month(m), d, hour, 59, 59, 0, time.UTC)
			if got := digest.WeekOf(at, time.UTC); got != want {
				t.Fatalf("WeekOf(%s) = %s, want %s", at, got, want)
			}
		}
		mondayOffset := oracleWeekday(y, m, d) - 1
		start := want.Start(time.UTC)
		if wantStart := time.Date(y, time.Month(m), d-mondayOffset, 0, 0, 0, 0, time.UTC); !start.Equal(wantStart) {
			t.Fatalf("%s.Start = %s, want %s", want, start, wantStart)
		}
		if end := want.End(time.UTC); end.Sub(start) != 7*24*time.Hour {
			t.Fatalf("%s: End - Start = %s", want, end.Sub(start))
		}
		if m == 12 && d == 28 {
			if got, w := digest.WeeksInYear(y), oracleWeeks(y); got != w {
				t.Fatalf("WeeksInYear(%d) = %d, want %d", y, got, w)
			}
		}
		days++
		if d++; d > daysIn(y, m) {
			d, m = 1, m+1
			if m > 12 {
				m, y = 1, y+1
			}
		}
	}
	if days != 40542 {
		t.Fatalf("checked %d days, want 40542", days)
	}
}

func mustLoad(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func mustWeek(t *testing.T, s string) digest.ISOWeek {
	t.Helper()
	w, err := digest.ParseISOWeek(s)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestWeekOfNamed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		at   string // RFC 3339
		zone string
		want string
	}{
		{"2026-12-31T12:00:00Z", "UTC", "2026-W53"},
		{"2027-01-03T23:59:59Z", "UTC", "2026-W53"},
		{"2027-01-04T00:00:00Z", "UTC", "2027-W01"},
		{"2024-12-30T00:00:00Z", "UTC", "2025-W01"},
		{"2021-01-01T00:00:00Z", "UTC", "2020-W53"},
		{"2020-12-31T00:00:00Z", "UTC", "2020-W53"},
		{"2008-12-29T00:00:00Z", "UTC", "2009-W01"},
		{"2010-01-03T00:00:00Z", "UTC", "2009-W53"},
		{"2026-11-23T00:00:00Z", "UTC", "2026-W48"},
		// The zone decides the wall clock, and so the week.
		{"2026-11-29T23:30:00Z", "UTC", "2026-W48"},
		{"2026-11-29T23:30:00Z", "Europe/Berlin", "2026-W49"},
		{"2026-11-30T03:00:00Z", "America/New_York", "2026-W48"},
		{"2026-11-29T14:00:00Z", "Australia/Sydney", "2026-W49"},
		{"2026-12-31T23:30:00Z", "Asia/Tokyo", "2026-W53"},
		{"2027-01-03T15:00:00Z", "Asia/Tokyo", "2027-W01"},
	}
	for _, tt := range tests {
		t.Run(tt.at+" "+tt.zone, func(t *testing.T) {
			t.Parallel()
			at, err := time.Parse(time.RFC3339, tt.at)
			if err != nil {
				t.Fatal(err)
			}
			if got := digest.WeekOf(at, mustLoad(t, tt.zone)); got.String() != tt.want {
				t.Errorf("WeekOf = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestWeekBoundsAcrossDST(t *testing.T) {
	t.Parallel()
	tests := []struct {
		zone  string
		week  string
		hours int
	}{
		{"Europe/Berlin", "2026-W13", 167}, // summer time starts Sun 29 Mar
		{"Europe/Berlin", "2026-W43", 169}, // and ends Sun 25 Oct
		{"Europe/Berlin", "2026-W48", 168},
		{"America/New_York", "2026-W10", 167}, // Sun 8 Mar
		{"America/New_York", "2026-W44", 169}, // Sun 1 Nov
		{"Australia/Sydney", "2026-W14", 169}, // daylight time ends Sun 5 Apr
		{"Australia/Sydney", "2026-W40", 167}, // and starts Sun 4 Oct
		{"Asia/Tokyo", "2026-W13", 168},
		{"Asia/Tokyo", "2026-W53", 168},
		{"Europe/Berlin", "2026-W53", 168}, // across the year end
	}
	for _, tt := range tests {
		t.Run(tt.zone+" "+tt.week, func(t *testing.T) {
			t.Parallel()
			loc := mustLoad(t, tt.zone)
			w := mustWeek(t, tt.week)
			start, end := w.Start(loc), w.End(loc)
			if got := end.Sub(start); got != time.Duration(tt.hours)*time.Hour {
				t.Errorf("week lasts %s, want %dh", got, tt.hours)
			}
			for name, at := range map[string]time.Time{"start": start, "end": end} {
				l := at.In(loc)
				if l.Weekday() != time.Monday || l.Hour() != 0 || l.Minute() != 0 || l.Second() != 0 {
					t.Errorf("%s = %s, want Monday 00:00 local", name, l)
				}
			}
			if !end.Equal(w.Next().Start(loc)) {
				t.Errorf("End %s is not the next week's Start %s", end, w.Next().Start(loc))
			}
			if !w.Contains(start, loc) || w.Contains(end, loc) || !w.Contains(end.Add(-time.Nanosecond), loc) {
				t.Errorf("Contains is not [Start, End)")
			}
			if got := digest.WeekOf(start, loc); got != w {
				t.Errorf("WeekOf(Start) = %s", got)
			}
		})
	}
}

func TestPrevNext(t *testing.T) {
	t.Parallel()
	tests := []struct{ week, prev, next string }{
		{"2027-W01", "2026-W53", "2027-W02"},
		{"2026-W53", "2026-W52", "2027-W01"},
		{"2025-W01", "2024-W52", "2025-W02"},
		{"2020-W53", "2020-W52", "2021-W01"},
		{"2026-W48", "2026-W47", "2026-W49"},
	}
	for _, tt := range tests {
		w := mustWeek(t, tt.week)
		if got := w.Prev().String(); got != tt.prev {
			t.Errorf("%s.Prev() = %s, want %s", tt.week, got, tt.prev)
		}
		if got := w.Next().String(); got != tt.next {
			t.Errorf("%s.Next() = %s, want %s", tt.week, got, tt.next)
		}
	}
}

func TestPreviousWeekOf(t *testing.T) {
	t.Parallel()
	berlin := mustLoad(t, "Europe/Berlin")
	tests := []struct {
		at   time.Time
		loc  *time.Location
		want string
	}{
		{time.Date(2027, 1, 4, 6, 0, 0, 0, berlin), berlin, "2026-W53"},
		{time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC), time.UTC, "2026-W48"},
		{time.Date(2025, 1, 6, 0, 0, 0, 0, time.UTC), time.UTC, "2025-W01"},
		{time.Date(2025, 1, 5, 23, 59, 0, 0, time.UTC), time.UTC, "2024-W52"},
		// Sunday 23:30 UTC is already Monday in Berlin.
		{time.Date(2026, 11, 29, 23, 30, 0, 0, time.UTC), berlin, "2026-W48"},
		{time.Date(2026, 11, 29, 23, 30, 0, 0, time.UTC), time.UTC, "2026-W47"},
	}
	for _, tt := range tests {
		if got := digest.PreviousWeekOf(tt.at, tt.loc).String(); got != tt.want {
			t.Errorf("PreviousWeekOf(%s, %s) = %s, want %s", tt.at, tt.loc, got, tt.want)
		}
	}
}

var parseWeekCases = []struct {
	in      string
	wantErr string // substring of the error; "" for a valid week
}{
	{"2026-W01", ""},
	{"2026-W48", ""},
	{"2026-W53", ""},
	{"2020-W53", ""},
	{"0001-W01", ""},
	{"9999-W52", ""},
	{"2025-W53", "ISO year 2025 has weeks W01 to W52"},
	{"2026-W54", "W01 to W53"},
	{"2026-W00", "W01 to W53"},
	{"0000-W01", "year must be 0001 to 9999"},
	{"2026-W1", "want YYYY-Www"},
	{"2026-w01", "want YYYY-Www"},
	{"2026W01", "want YYYY-Www"},
	{"2026-01", "want YYYY-Www"},
	{"26-W01", "want YYYY-Www"},
	{"2026-W01 ", "want YYYY-Www"},
	{"+026-W01", "want YYYY-Www"},
	{"2026-W-1", "want YYYY-Www"},
	{"２０２６-W01", "want YYYY-Www"},
	{"", "want YYYY-Www"},
	{"garbage!", "want YYYY-Www"},
}

func TestParseISOWeek(t *testing.T) {
	t.Parallel()
	for _, tt := range parseWeekCases {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			w, err := digest.ParseISOWeek(tt.in)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if w.String() != tt.in {
					t.Errorf("String() = %q", w.String())
				}
				return
			}
			if err == nil {
				t.Fatalf("got %s, want an error", w)
			}
			if !errors.Is(err, digest.ErrInvalidWeek) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q, want ErrInvalidWeek saying %q", err, tt.wantErr)
			}
		})
	}
}

func TestISOWeekText(t *testing.T) {
	t.Parallel()
	var w digest.ISOWeek
	if err := w.UnmarshalText([]byte("2026-W53")); err != nil || w != (digest.ISOWeek{Year: 2026, Week: 53}) {
		t.Fatalf("UnmarshalText = %v, %v", w, err)
	}
	if b, _ := w.MarshalText(); string(b) != "2026-W53" {
		t.Errorf("MarshalText = %s", b)
	}
	if err := w.UnmarshalText([]byte("2025-W53")); err == nil {
		t.Error("UnmarshalText accepted 2025-W53")
	}
	if !(digest.ISOWeek{}).IsZero() || w.IsZero() {
		t.Error("IsZero")
	}
}

func FuzzParseISOWeek(f *testing.F) {
	for _, tt := range parseWeekCases {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w, err := digest.ParseISOWeek(s)
		if err != nil {
			if !errors.Is(err, digest.ErrInvalidWeek) {
				t.Fatalf("error %v does not wrap ErrInvalidWeek", err)
			}
			return
		}
		if w.String() != s {
			t.Fatalf("ParseISOWeek(%q).String() = %q", s, w.String())
		}
		if w2, err := digest.ParseISOWeek(w.String()); err != nil || w2 != w {
			t.Fatalf("round trip of %q: %v, %v", s, w2, err)
		}
		start := w.Start(time.UTC)
		if start.Weekday() != time.Monday || digest.WeekOf(start, time.UTC) != w {
			t.Fatalf("%s starts on %s", w, start)
		}
	})
}

func TestISOWeekTextRoundTrip(t *testing.T) {
	t.Parallel()
	for _, w := range []digest.ISOWeek{{2026, 53}, {2025, 1}, {1, 1}} {
		b, err := w.MarshalText()
		if err != nil {
			t.Fatalf("%v: %v", w, err)
		}
		var back digest.ISOWeek
		if err := back.UnmarshalText(b); err != nil || back != w {
			t.Fatalf("%v → %q → %v, %v", w, b, back, err)
		}
	}
	for _, w := range []digest.ISOWeek{{}, {2025, 53}, {2026, 0}, {10000, 1}} {
		if b, err := w.MarshalText(); !errors.Is(err, digest.ErrInvalidWeek) {
			t.Errorf("MarshalText(%#v) = %q, %v; want ErrInvalidWeek", w, b, err)
		}
	}
}
