package digest

import (
	"errors"
	"fmt"
	"time"
)

// ErrBadTimeZone is wrapped by ValidTimeZone for a zone that is not an
// IANA time zone name.
var ErrBadTimeZone = errors.New("not an IANA time zone such as Europe/Berlin")

// ValidTimeZone checks a customer's optional time_zone: "" (none), or an
// IANA name the zone database knows ("Asia/Tokyo", "UTC"). "Local" (the
// machine's zone, which differs between hosts) is refused.
func ValidTimeZone(name string) error {
	if name == "" {
		return nil
	}
	_, err := customerLocation(name)
	return err
}

// customerLocation loads the zone name, from a cache: the zone database
// is read and parsed by every time.LoadLocation, and a run has a handful
// of distinct zones for many customers.
func customerLocation(name string) (*time.Location, error) {
	z := zones.get(name, loadZone)
	return z.loc, z.err
}

func loadZone(name string) zoneEntry {
	loc, err := time.LoadLocation(name)
	if name == "" || name == "Local" || len(name) > 64 || err != nil {
		return zoneEntry{err: fmt.Errorf("%q: %w", name, ErrBadTimeZone)}
	}
	return zoneEntry{loc: loc}
}

type zoneEntry struct {
	loc *time.Location
	err error
}

var zones = localeCache[zoneEntry]{m: map[string]zoneEntry{}}
