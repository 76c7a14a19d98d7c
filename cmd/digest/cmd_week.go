package main

import (
	"context"
	"fmt"
	"time"

	"github.com/weeklydigest/digest/digest"
)

const weekHelp = `Usage: digest week [DATE] [--tz Area/City]

Prints the ISO 8601 week of DATE (YYYY-MM-DD; default: today in the zone),
then the week's start (Monday 00:00) and end (the next Monday 00:00) in
RFC 3339, separated by single spaces. A run for that week covers activity
that occurred in [start, end).

Examples:
  digest week 2026-12-31                 # 2026-W53 2026-12-28T00:00:00Z 2027-01-04T00:00:00Z
  digest week 2027-01-01 --tz Europe/Berlin
  DIGEST_TZ=America/New_York digest week
`

func cmdWeek(_ context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "week", weekHelp)
	st := register(fs, env, "week")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef("want at most one DATE, got %d arguments", len(pos))
	}
	loc, err := parseWeek(st)
	if err != nil {
		return err
	}
	day := env.now().In(loc)
	if len(pos) == 1 {
		day, err = time.ParseInLocation(time.DateOnly, pos[0], loc)
		if err != nil {
			return usagef("DATE %q: want YYYY-MM-DD, e.g. 2026-12-31", pos[0])
		}
	}
	w := digest.WeekOf(day, loc)
	fmt.Fprintf(env.Stdout, "%s %s %s\n", w, w.Start(loc).Format(time.RFC3339), w.End(loc).Format(time.RFC3339))
	return nil
}

// parseWeek reads week's one setting: the zone of the weeks.
func parseWeek(st *settings) (*time.Location, error) { return st.location() }
