package redact

import "strings"

// spaces are the separators of a keyword/value connection string (libpq's
// isspace).
const spaces = " \t\n\r\v\f"

// parseKeywordValue masks the secret values of a PostgreSQL keyword/value
// connection string, reading it as pgconn and libpq do: keyword, '=',
// then a value up to the next unescaped space, or a quoted '…' value with
// backslash escapes. Pairs come back one space apart, as written
// otherwise; a string libpq would refuse (no '=', an open quote) is
// unparsable.
func parseKeywordValue(raw string) (redaction, bool) {
	var r redaction
	var pairs []string
	s := strings.TrimLeft(raw, spaces)
	for s != "" {
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return r, false
		}
		key := strings.TrimRight(s[:eq], spaces)
		if key == "" || strings.ContainsAny(key, spaces) {
			return r, false
		}
		s = strings.TrimLeft(s[eq+1:], spaces)
		end, ok := valueEnd(s)
		if !ok {
			return r, false
		}
		value := s[:end]
		s = strings.TrimLeft(s[end:], spaces)
		if SecretName(key) {
			if value != "" && value != "''" {
				r.secrets = append(r.secrets, value, unquote(value))
			}
			value = Mask
		}
		pairs = append(pairs, key+"="+value)
	}
	r.shown = strings.Join(pairs, " ")
	return r, true
}

// valueEnd returns the length of the value s starts with, its quotes
// included, and false for an unterminated quoted value.
func valueEnd(s string) (int, bool) {
	quoted := strings.HasPrefix(s, "'")
	i := 0
	if quoted {
		i = 1
	}
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			i++ // the escaped byte; a trailing backslash ends the value
			if i >= len(s) {
				return len(s), !quoted
			}
		case quoted && c == '\'':
			return i + 1, true
		case !quoted && strings.IndexByte(spaces, c) >= 0:
			return i, true
		}
	}
	return len(s), !quoted
}

// unquote is a value as the server gets it: quotes and escapes removed.
func unquote(v string) string {
	v = strings.TrimSuffix(strings.TrimPrefix(v, "'"), "'")
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			i++
		}
		b.WriteByte(v[i])
	}
	return b.String()
}
