package listen

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/weeklydigest/digest/unsubscribe"
)

// Route is where the unsubscribe URLs of DIGEST_UNSUBSCRIBE_URL land on
// this service: the template's path up to the token.
type Route struct {
	// Prefix is the URL path before the token, starting and ending with
	// '/': "/u/" for https://bank.example/u/{token}.
	Prefix string
}

// ParseRoute derives the Route of an unsubscribe URL template. The
// service can take only an https template whose path ends in /{token},
// with no query, fragment or second placeholder, and whose path is made of
// unreserved characters (it becomes a ServeMux pattern).
func ParseRoute(template string) (Route, error) {
	tpl, err := unsubscribe.ParseTemplate(template)
	if err != nil {
		return Route{}, err
	}
	if !tpl.HTTPS() {
		return Route{}, fmt.Errorf("%w: %q: digest serve takes one-click POSTs, which need an https:// URL", unsubscribe.ErrTemplate, template)
	}
	if strings.Count(template, unsubscribe.Placeholder) != 1 || !strings.HasSuffix(template, "/"+unsubscribe.Placeholder) {
		return Route{}, fmt.Errorf("%w: %q: digest serve wants the token once, as the last path segment: https://host/path/%s",
			unsubscribe.ErrTemplate, template, unsubscribe.Placeholder)
	}
	u, err := url.Parse(strings.TrimSuffix(template, unsubscribe.Placeholder))
	if err != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return Route{}, fmt.Errorf("%w: %q: no query or fragment before the token", unsubscribe.ErrTemplate, template)
	}
	prefix := u.EscapedPath()
	if !strings.HasPrefix(prefix, "/") {
		prefix = "/" + prefix
	}
	for _, c := range []byte(prefix) {
		if c != '/' && !tokenByte(c) {
			return Route{}, fmt.Errorf("%w: %q: the path may hold only letters, digits, '-', '_', '.', '~' and '/'", unsubscribe.ErrTemplate, template)
		}
	}
	return Route{Prefix: prefix}, nil
}

// Token returns the token of an escaped request path (URL.EscapedPath),
// and false unless the path is the prefix followed by one segment of
// token characters, at most unsubscribe.MaxTokenLen of them: anything
// else (an escape, a slash, a dot segment, an empty token) is not one of
// our URLs, whatever the mux made of it.
func (r Route) Token(escapedPath string) (string, bool) {
	tok, ok := strings.CutPrefix(escapedPath, r.Prefix)
	if !ok || tok == "" || len(tok) > unsubscribe.MaxTokenLen || tok == "." || tok == ".." {
		return "", false
	}
	for i := 0; i < len(tok); i++ {
		if !tokenByte(tok[i]) {
			return "", false
		}
	}
	return tok, true
}

// tokenByte reports whether c may appear in a token (and in a route's
// path): RFC 3986's unreserved characters.
func tokenByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~'
}
