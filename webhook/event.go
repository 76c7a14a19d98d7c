package webhook

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// DefaultTolerance is how far a signed timestamp may be from the
// receiver's clock, either way, when Options.Tolerance is zero.
const DefaultTolerance = 5 * time.Minute

// TagName is the provider tag (SES message tag, Resend tag) that carries
// a digest key in the form TagValue makes.
const TagName = "digest-key"

// CustomArg is the custom argument (SendGrid unique_args, Mailgun
// user-variables) that carries a digest key verbatim.
const CustomArg = "digest_key"

// TagValue is how a digest key travels as a provider tag, whose values
// allow only ASCII letters, digits, '_' and '-': the key id, '_' and the
// hex. A key id with another character ('.') has no tag form: ok is
// false. The inverse is KeyFromTag.
func TagValue(key digest.Key) (value string, ok bool) {
	kid := key.KeyID()
	for _, c := range kid {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return "", false
		}
	}
	return kid + "_" + key.Hex(), true
}

// KeyFromTag reverses TagValue; a value that is not a tagged key gives the
// zero Key. The hex is always the last 64 characters, so the key id may
// itself hold '_'.
func KeyFromTag(v string) digest.Key {
	const hexLen = 2 * sha256.Size
	if len(v) < hexLen+2 || v[len(v)-hexLen-1] != '_' {
		return ""
	}
	return parseKey(v[:len(v)-hexLen-1] + ":" + v[len(v)-hexLen:])
}

// parseKey returns s as a Key, or the zero Key when s is not one: a
// message sent by another system may carry anything in the field, and an
// event without a key is still an event.
func parseKey(s string) digest.Key {
	k, err := digest.ParseKey(strings.TrimSpace(s))
	if err != nil {
		return ""
	}
	return k
}

// requireJSON checks the request's media type: application/json, or one
// of extra (SNS posts text/plain).
func requireJSON(header http.Header, extra ...string) error {
	mt, _, err := mime.ParseMediaType(header.Get("Content-Type"))
	if err != nil {
		return fmt.Errorf("%w: want application/json", ErrContentType)
	}
	if mt == "application/json" {
		return nil
	}
	for _, e := range extra {
		if mt == e {
			return nil
		}
	}
	return fmt.Errorf("%w: %s, want application/json", ErrContentType, safeText(mt, 40))
}

// readJSON checks the request's media type (requireJSON) and decodes
// body into v, wrapping a failure in ErrPayload without quoting the body.
func readJSON(header http.Header, body []byte, v any, what string, extraTypes ...string) error {
	if err := requireJSON(header, extraTypes...); err != nil {
		return err
	}
	return decodeJSON(body, v, what)
}

// decodeJSON decodes body into v, wrapping any failure in ErrPayload
// without quoting the body.
func decodeJSON(body []byte, v any, what string) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %s is not the documented JSON", ErrPayload, what)
	}
	return nil
}

// orDefault is tolerance, or DefaultTolerance when it is not positive.
func orDefault(tolerance time.Duration) time.Duration {
	if tolerance <= 0 {
		return DefaultTolerance
	}
	return tolerance
}

// checkUnixAge is checkAge for a signed timestamp in Unix seconds; what
// names it in the error.
func checkUnixAge(timestamp string, now time.Time, tolerance time.Duration, what string) error {
	sec, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s is not Unix seconds", ErrSignature, what)
	}
	return checkAge(time.Unix(sec, 0), now, tolerance)
}

// checkAge rejects a signed timestamp further than tolerance from now:
// a captured request replayed later fails its signature check.
func checkAge(at, now time.Time, tolerance time.Duration) error {
	d := now.Sub(at)
	if d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: timestamp %s from the receiver's clock (tolerance %s)", ErrSignature, d.Round(time.Second), tolerance)
	}
	return nil
}

// unixSeconds parses a decimal Unix time in seconds, with an optional
// fraction (Mailgun's timestamps have one), exactly: no float rounding.
func unixSeconds(s string) (time.Time, bool) {
	whole, frac, _ := strings.Cut(strings.TrimSpace(s), ".")
	sec, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || sec < 0 || sec > 1<<40 || len(frac) > 9 {
		return time.Time{}, false
	}
	var nsec int64
	if frac != "" {
		n, err := strconv.ParseUint(frac, 10, 32)
		if err != nil {
			return time.Time{}, false
		}
		nsec = int64(n)
		for range 9 - len(frac) {
			nsec *= 10
		}
	}
	return time.Unix(sec, nsec).UTC(), true
}

// eventTime reads an event's Unix time (seconds, with a fraction or
// not); absent gives now.
func eventTime(ts json.Number, now time.Time, what string) (time.Time, error) {
	if ts == "" {
		return now, nil
	}
	t, ok := unixSeconds(ts.String())
	if !ok {
		return time.Time{}, fmt.Errorf("%w: %s is not Unix seconds", ErrPayload, what)
	}
	return t, nil
}

// rawKey is the key in a JSON value that should be a string holding one;
// anything else (a number, an object, absent) is no key.
func rawKey(v json.RawMessage) digest.Key {
	var s string
	if json.Unmarshal(v, &s) != nil {
		return ""
	}
	return parseKey(s)
}

// parseTime reads an RFC 3339 time (any number of fraction digits);
// empty gives fallback.
func parseTime(s string, fallback time.Time) (time.Time, error) {
	if s == "" {
		return fallback, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: a timestamp is not RFC 3339", ErrPayload)
	}
	return t.UTC(), nil
}

// derivedID makes an event ID from fields that identify an event at a
// provider that gives it none: a digest, so the ID quotes no address.
func derivedID(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return "d:" + hex.EncodeToString(h.Sum(nil)[:16])
}

// maxDetail bounds Event.Detail.
const maxDetail = 64

// detail joins the non-empty parts into Event.Detail, each made safe by
// safeText; a part that looks like it holds an address is left out.
func detail(parts ...string) string {
	var b []string
	for _, p := range parts {
		if strings.Contains(p, "@") {
			continue
		}
		if p = safeText(p, maxDetail); p != "" {
			b = append(b, p)
		}
	}
	return safeText(strings.Join(b, " "), maxDetail)
}

// safeText keeps the ASCII letters, digits and a few separators of s ('@'
// not among them), at most max bytes of them: provider codes and types go
// into errors and the history this way, never free text or an address.
func safeText(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(" ._-/:", r) {
			return r
		}
		return -1
	}, s)
	s = strings.TrimSpace(s)
	if len(s) > max {
		s = s[:max]
	}
	return s
}

// header finds name in a list of provider-reported headers, ignoring case.
func header(list []nameValue, name string) string {
	for _, h := range list {
		if strings.EqualFold(h.Name, name) {
			return h.Value
		}
	}
	return ""
}

// nameValue is a header or tag as SES and Resend report them.
type nameValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// HeaderKey is the message header that carries the digest key verbatim
// (sender.HeaderKey): providers that report the message's headers give it
// back.
const HeaderKey = "X-Digest-Key"
