// Package redact hides the secrets of URLs and connection strings before
// they are shown or logged: --help's defaults, log records, errors and
// status output.
//
// A URL keeps its scheme, user name, host, path and the names of its query
// parameters; its password and the values of secret-looking query
// parameters become Mask, and its fragment goes. A PostgreSQL keyword/value
// connection string ("host=db user=app password=…") keeps every pair but
// the secret ones' values. What cannot be parsed is never echoed: it may
// be a password pasted into the wrong variable.
package redact

import (
	"errors"
	"net/url"
	"strings"
)

// Mask stands for a hidden secret.
const Mask = "xxxxx"

// Unparsable replaces a value URL cannot parse.
const Unparsable = "(unparsable URL)"

// URL returns raw with its secrets replaced by Mask, or "" for "":
//
//	postgres://app:pw@db:5432/app?sslmode=disable  postgres://app:xxxxx@db:5432/app?sslmode=disable
//	https://api.example.com/v1?token=t&x=1#frag     https://api.example.com/v1?token=xxxxx&x=1
//	host=db user=app password='p w'                 host=db user=app password=xxxxx
//	mailto:unsubscribe+{token}@example.com          (unchanged: nothing secret)
//	S3cret, http://a b/ (no scheme, or malformed)   (unparsable URL)
//
// The parts kept are kept as written (not re-encoded), so that a template
// such as https://host/u/{token} reads as configured.
func URL(raw string) string {
	r, ok := parse(raw)
	if !ok {
		return Unparsable
	}
	return r.shown
}

// Error returns err with every secret of the URLs raws (as URL would hide
// them, written raw or percent-decoded) replaced by Mask in its message, and
// each whole URL by its redacted form; errors.Is and errors.As still see
// err. Nil for nil. For errors of libraries that quote the URL they were
// given (a Pushgateway client, an exporter): the caller cannot reword them.
func Error(err error, raws ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	changed := false
	for _, raw := range raws {
		if raw == "" {
			continue
		}
		r, ok := parse(raw)
		if !ok {
			// Not parsable: the whole value is the only secret known.
			r = redaction{shown: Unparsable, secrets: []string{raw}}
		}
		if strings.Contains(msg, raw) && r.shown != raw {
			msg, changed = strings.ReplaceAll(msg, raw, r.shown), true
		}
		for _, s := range r.secrets {
			for _, form := range forms(s) {
				if strings.Contains(msg, form) {
					msg, changed = strings.ReplaceAll(msg, form, Mask), true
				}
			}
		}
	}
	if !changed {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

// forms are the ways a secret may be written: as in the URL, and
// percent-decoded (a library may print the parsed value).
func forms(s string) []string {
	out := []string{s}
	for _, dec := range []func(string) (string, error){url.PathUnescape, url.QueryUnescape} {
		if d, err := dec(s); err == nil && d != "" && d != s {
			out = append(out, d)
		}
	}
	return out
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// Is keeps errors.Is(Error(err), err) true for a sentinel err.
func (e *redactedError) Is(target error) bool { return errors.Is(e.err, target) }

// redaction is a value as shown, and the secrets taken out of it (as
// written in the value).
type redaction struct {
	shown   string
	secrets []string
}

func parse(raw string) (redaction, bool) {
	if raw == "" {
		return redaction{}, true
	}
	if keywordValue(raw) {
		return parseKeywordValue(raw)
	}
	return parseURL(raw)
}

// keywordValue reports whether raw reads as a PostgreSQL keyword/value
// connection string: a keyword (no ':' or '/') before its first '='.
func keywordValue(raw string) bool {
	i := strings.IndexByte(raw, '=')
	return i > 0 && !strings.ContainsAny(raw[:i], ":/?#")
}

// parseURL cuts raw where net/url cuts it (the fragment at the first '#',
// the query at the first '?', the authority after "//" up to the first '/',
// the user information before its last '@', the user name before its
// first ':'), having first let net/url confirm that raw parses.
func parseURL(raw string) (redaction, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		// No scheme: a host name, or a secret in the wrong variable.
		return redaction{}, false
	}
	var r redaction
	rest, _, _ := strings.Cut(raw, "#") // the fragment goes: a token may sit there
	rest, query, hasQuery := strings.Cut(rest, "?")
	scheme, hier := rest[:len(u.Scheme)], rest[len(u.Scheme)+1:]
	var b strings.Builder
	b.WriteString(scheme + ":")
	if authority, ok := strings.CutPrefix(hier, "//"); ok {
		path := ""
		if i := strings.IndexByte(authority, '/'); i >= 0 {
			authority, path = authority[:i], authority[i:]
		}
		b.WriteString("//")
		if i := strings.LastIndexByte(authority, '@'); i >= 0 {
			b.WriteString(userinfo(authority[:i], &r) + "@")
			authority = authority[i+1:]
		}
		b.WriteString(authority + path)
	} else {
		// Opaque (mailto:…, events:ses): no user information by the
		// grammar, but "user:password@host" there is still hidden.
		if i := strings.LastIndexByte(hier, '@'); i >= 0 {
			hier = userinfo(hier[:i], &r) + hier[i:]
		}
		b.WriteString(hier)
	}
	if hasQuery {
		b.WriteString("?" + redactQuery(query, &r))
	}
	r.shown = b.String()
	return r, true
}

// userinfo returns "user" or "user:xxxxx", recording the password.
func userinfo(s string, r *redaction) string {
	user, password, ok := strings.Cut(s, ":")
	if !ok {
		return user
	}
	if password != "" {
		r.secrets = append(r.secrets, password)
	}
	return user + ":" + Mask
}

// redactQuery masks the values of secret-looking parameters; a parameter
// whose name cannot be decoded is masked whole.
func redactQuery(q string, r *redaction) string {
	parts := strings.Split(q, "&")
	for i, p := range parts {
		k, v, hasValue := strings.Cut(p, "=")
		name, err := url.QueryUnescape(k)
		switch {
		case err != nil:
			r.secrets = append(r.secrets, p)
			parts[i] = Mask
		case hasValue && SecretName(name):
			if v != "" {
				r.secrets = append(r.secrets, v)
			}
			parts[i] = k + "=" + Mask
		}
	}
	return strings.Join(parts, "&")
}

// SecretName reports whether a query parameter or connection keyword named
// name holds a secret: password, sslpassword, token, access_token, secret,
// client_secret, key, api_key, apikey, X-Amz-Signature, sig and the like
// (case, '-', '_' and '.' ignored). A name ending in "key" counts: a key
// file's path (sslkey) hidden is a small loss, a key shown is not.
func SecretName(name string) bool {
	n := strings.Map(func(c rune) rune {
		switch c {
		case '-', '_', '.', ' ':
			return -1
		}
		return c
	}, strings.ToLower(name))
	switch n {
	case "pwd", "pw", "pass", "sig", "authorization": // not "auth": an SMTP URL's mechanism
		return true
	}
	for _, s := range []string{"password", "passwd", "passphrase", "secret", "token", "credential", "signature"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return strings.HasSuffix(n, "key")
}
