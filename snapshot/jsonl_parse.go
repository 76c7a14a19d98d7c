package snapshot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/weeklydigest/digest/digest"
)

// fieldError is what is wrong with one line, and in which field ("" when
// the line as a whole is at fault, e.g. it is not JSON).
type fieldError struct {
	field string
	err   error
}

// errMissing and the others are the reasons a field is bad.
var (
	errMissing = errors.New("required field is missing")
	errNull    = errors.New("must not be null")
	errTwice   = errors.New("field appears twice")
	errUnknown = errors.New("unknown field")
)

// parseLine parses one line. On failure the returned record still carries
// the customer id when that field was read and valid.
func parseLine(line []byte) (digest.Record, *fieldError) {
	var rec digest.Record
	seen, ferr := walkObject(line, "", func(key, path string, raw json.RawMessage) error {
		c := &rec.Customer
		switch key {
		case "customer_id":
			return stringField(raw, &c.ID, digest.CheckCustomerID)
		case "email":
			return stringField(raw, &c.Email, digest.CheckEmail)
		case "name":
			return stringField(raw, &c.Name, digest.CheckText)
		case "locale":
			return stringField(raw, &c.Locale, digest.CheckLocale)
		case "time_zone":
			return stringField(raw, &c.TimeZone, digest.ValidTimeZone)
		case "unsubscribed_at":
			return suppressionField(raw, &c.Suppressed)
		case "activity":
			return parseActivity(raw, &rec.Activity)
		}
		return errUnknown
	})
	if ferr == nil {
		ferr = seen.require("", "customer_id", "email")
	}
	if ferr != nil && ferr.field == "customer_id" {
		rec.Customer.ID = ""
	}
	return rec, ferr
}

// parseActivity parses the activity array. A bad row's error is returned as
// a *fieldError naming the row, e.g. activity[2].currency.
func parseActivity(raw json.RawMessage, out *[]digest.Activity) error {
	if isNull(raw) {
		return errNull
	}
	var rows []json.RawMessage
	if err := json.Unmarshal(raw, &rows); err != nil {
		return errors.New("must be an array of objects")
	}
	*out = make([]digest.Activity, len(rows))
	for i, row := range rows {
		a := &(*out)[i]
		path := fmt.Sprintf("activity[%d]", i)
		seen, ferr := walkObject(row, path, func(key, _ string, raw json.RawMessage) error {
			switch key {
			case "occurred_at":
				return timeField(raw, &a.OccurredAt)
			case "recorded_at":
				return timeField(raw, &a.RecordedAt)
			case "kind":
				return stringField(raw, &a.Kind, digest.CheckKind)
			case "amount_minor":
				return amountField(raw, &a.AmountMinor)
			case "currency":
				return stringField(raw, &a.Currency, digest.CheckCurrency)
			case "description":
				return stringField(raw, &a.Description, digest.CheckText)
			}
			return errUnknown
		})
		if ferr == nil {
			ferr = seen.require(path, "occurred_at", "recorded_at", "kind", "amount_minor", "currency")
		}
		if ferr != nil {
			return ferr
		}
	}
	return nil
}

// seenFields records which keys an object had.
type seenFields map[string]bool

func (s seenFields) require(path string, keys ...string) *fieldError {
	for _, k := range keys {
		if !s[k] {
			return &fieldError{join(path, k), errMissing}
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// walkObject calls fn for each member of the JSON object in b, in order,
// and fails on anything else: not an object, a key twice, trailing data. A
// *fieldError from fn is returned as is; any other error is attributed to
// the member's field.
func walkObject(b []byte, path string, fn func(key, path string, raw json.RawMessage) error) (seenFields, *fieldError) {
	seen := seenFields{}
	dec := json.NewDecoder(bytes.NewReader(b))
	where := path
	if tok, err := dec.Token(); err != nil {
		return seen, &fieldError{where, syntaxError(err)}
	} else if tok != json.Delim('{') {
		return seen, &fieldError{where, errors.New("must be a JSON object")}
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return seen, &fieldError{where, syntaxError(err)}
		}
		key := tok.(string) // inside an object, json.Decoder only returns string keys
		field := join(path, key)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return seen, &fieldError{field, syntaxError(err)}
		}
		if seen[key] {
			return seen, &fieldError{field, errTwice}
		}
		seen[key] = true
		if err := fn(key, field, raw); err != nil {
			if fe, ok := errors.AsType[*fieldError](err); ok {
				return seen, fe
			}
			return seen, &fieldError{field, err}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return seen, &fieldError{where, syntaxError(err)}
	}
	if _, err := dec.Token(); err != io.EOF {
		return seen, &fieldError{where, errors.New("unexpected data after the JSON object")}
	}
	return seen, nil
}

func (e *fieldError) Error() string { return e.field + ": " + e.err.Error() }

func syntaxError(err error) error {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("invalid JSON: unexpected end of line")
	}
	return fmt.Errorf("invalid JSON: %w", err)
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

// stringField decodes a JSON string and checks it with valid, if not nil.
func stringField(raw json.RawMessage, dst *string, valid func(string) error) error {
	if isNull(raw) {
		return errNull
	}
	if len(raw) == 0 || raw[0] != '"' {
		return errors.New("must be a string")
	}
	// encoding/json would replace invalid UTF-8, and a lone surrogate
	// escape (\ud800), with U+FFFD: the customer greeted with it and the
	// fingerprint taken of the mangled text. Both make the field bad.
	if !utf8.Valid(raw) {
		return errors.New("is not valid UTF-8")
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return errors.New("must be a string")
	}
	if strings.ContainsRune(*dst, utf8.RuneError) && !bytes.ContainsRune(raw, utf8.RuneError) &&
		!bytes.Contains(bytes.ToLower(raw), []byte(`\ufffd`)) {
		return errors.New("has a \\u escape that is not a character (a lone surrogate)")
	}
	if valid != nil {
		return valid(*dst)
	}
	return nil
}

// timeField decodes an RFC 3339 timestamp with a zone offset.
func timeField(raw json.RawMessage, dst *time.Time) error {
	var s string
	if err := stringField(raw, &s, nil); err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("%q is not an RFC 3339 timestamp such as 2026-11-23T09:15:00Z", s)
	}
	*dst = t
	return nil
}

// suppressionField reads unsubscribed_at: an RFC 3339 timestamp marks the
// customer as unsubscribed; null is allowed here and means subscribed, the
// same as an absent field.
func suppressionField(raw json.RawMessage, dst *bool) error {
	if isNull(raw) {
		return nil
	}
	var t time.Time
	if err := timeField(raw, &t); err != nil {
		return err
	}
	*dst = true
	return nil
}

// amountField decodes a JSON integer: digits with an optional minus sign,
// no fraction, no exponent, not quoted.
func amountField(raw json.RawMessage, dst *int64) error {
	if isNull(raw) {
		return errNull
	}
	s := string(raw)
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return fmt.Errorf("%s is not an integer number of minor units", s)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%s does not fit in 64 bits", s)
	}
	*dst = n
	return nil
}
