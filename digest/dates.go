// Dates: the week's words and days as a digest shows them, cached per
// language and zone.

package digest

import (
	"time"

	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// weekKey is what the words of weekWords depend on: the same for every
// digest of a run in one language and zone. The civil days of the week
// are those of the instants from and to with their offsets in the zone.
type weekKey struct {
	locale         *localeFormat // the formats, and so the words
	week           ISOWeek
	zone           string
	from, to       int64 // Unix seconds
	fromOff, toOff int   // seconds east of UTC
	typ, version   string
}

// zone is the zone rows are shown in, which the footer names.
func newWeekKey(f *localeFormat, d *Digest, zone, typ, version string) weekKey {
	_, fromOff := d.From.Zone()
	_, toOff := d.To.In(d.From.Location()).Zone()
	return weekKey{
		locale: f, week: d.Identity.Week, zone: zone,
		from: d.From.Unix(), to: d.To.Unix(), fromOff: fromOff, toOff: toOff,
		typ: typ, version: version,
	}
}

// weekText is what a week's digests in one language and zone share.
type weekText struct {
	week                               string // "2026-W48": an identifier, ASCII in every language
	rng                                string // weekRange
	subject, intro, introEmpty, footer string
	days                               [7]weekDay // the days of the week, as rows show them
}

type weekDay struct {
	year  int
	month time.Month
	day   int
	text  string
}

// day formats t (in the digest's zone) as a row's date: from the week's
// days, or formatted afresh for a day outside them.
func (w *weekText) day(f *localeFormat, t time.Time) string {
	if s, ok := w.cachedDay(t); ok {
		return s
	}
	return f.formatDay(t)
}

func (w *weekText) cachedDay(t time.Time) (string, bool) {
	y, m, d := t.Date()
	for _, wd := range w.days {
		if wd.day == d && wd.month == m && wd.year == y {
			return wd.text, true
		}
	}
	return "", false
}

// maxWeekWords bounds the cache of weekWords (languages times zones, in
// practice); past it the cache starts again.
const maxWeekWords = 1024

// weekWords returns the week of d (k is newWeekKey's) as its digests show
// it: its name, its range, the translated sentences that take the week, the
// zone and the digest type, and its seven days as rows show them. From a
// cache: they are the same for every digest of a run in one language and
// zone, and formatting them was most of what the catalogue and the dates
// cost per digest. The *weekText is shared: never written once cached.
func (r *Renderer) weekWords(p *message.Printer, f *localeFormat, d *Digest, k weekKey) *weekText {
	r.weekMu.Lock()
	w, ok := r.week[k]
	r.weekMu.Unlock()
	if ok {
		return w
	}
	week, rng := k.week.String(), f.weekRange(d.From, d.To)
	w = &weekText{
		week: week, rng: rng,
		// No ISO week token in what the customer reads: the range names
		// the week (few read "2026-W48").
		subject: p.Sprintf(msgSubject, rng),
		intro:   p.Sprintf(msgIntro, rng), introEmpty: p.Sprintf(msgIntroEmpty, rng),
		footer: p.Sprintf(msgFooter, k.zone),
	}
	y, m, day := d.From.Date()
	for i := range w.days {
		// Noon UTC of the civil day: the formats read only its date.
		t := time.Date(y, m, day+i, 12, 0, 0, 0, time.UTC)
		w.days[i] = weekDay{year: t.Year(), month: t.Month(), day: t.Day(), text: f.formatDay(t)}
	}
	r.weekMu.Lock()
	if len(r.week) >= maxWeekWords {
		clear(r.week)
	}
	r.week[k] = w
	r.weekMu.Unlock()
	return w
}

// weekRange formats the civil days of [from, to) in from's zone, in
// English (en-US): "Nov 23 – 29, 2026", "Nov 30 – Dec 6, 2026" or
// "Dec 28, 2026 – Jan 3, 2027" (U+2009 around the dash).
func weekRange(from, to time.Time) string { return formatFor(language.English).weekRange(from, to) }
