package smtp

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"unicode"

	"github.com/weeklydigest/digest/sender"
)

// TLSMode says how the SMTP connection is encrypted.
type TLSMode int

// TLS modes, as spelled in the URL's tls parameter.
const (
	// TLSMandatory requires STARTTLS; a server without it is an error. The default.
	TLSMandatory TLSMode = iota
	// TLSOpportunistic uses STARTTLS when the server offers it, plain text otherwise.
	TLSOpportunistic
	// TLSNone never encrypts. Only for a local relay or tests.
	TLSNone
	// TLSImplicit speaks TLS from the first byte (SMTPS, usually port 465).
	TLSImplicit
)

var tlsModeNames = map[TLSMode]string{
	TLSMandatory: "mandatory", TLSOpportunistic: "opportunistic", TLSNone: "none", TLSImplicit: "implicit",
}

func (m TLSMode) String() string {
	if s, ok := tlsModeNames[m]; ok {
		return s
	}
	return "TLSMode(" + strconv.Itoa(int(m)) + ")"
}

// AuthMethod names an SMTP AUTH mechanism.
type AuthMethod string

// Authentication methods, as spelled in the URL's auth parameter.
const (
	// AuthNone sends no AUTH; the default when the URL has no user.
	AuthNone AuthMethod = ""
	// AuthAuto picks the strongest mechanism the server offers (the default
	// when the URL has a user); PLAIN and LOGIN only over TLS.
	AuthAuto     AuthMethod = "auto"
	AuthPlain    AuthMethod = "plain"    // AUTH PLAIN; refused over plain text except to localhost.
	AuthLogin    AuthMethod = "login"    // AUTH LOGIN; refused over plain text except to localhost.
	AuthCRAMMD5  AuthMethod = "cram-md5" // AUTH CRAM-MD5.
	AuthXOAuth2  AuthMethod = "xoauth2"  // AUTH XOAUTH2; the password is the OAuth 2 access token.
	defaultPort             = 587
	implicitPort            = 465
)

// Server is where and how to reach the SMTP server. Its String and
// LogValue never show the password.
type Server struct {
	Host     string
	Port     int
	Username string
	Password string // secret; never logged
	TLS      TLSMode
	Auth     AuthMethod
}

// ErrSMTPURL is wrapped by every error ParseSMTPURL returns. No such error
// contains the password.
var ErrSMTPURL = errors.New("invalid SMTP URL")

// ParseSMTPURL parses
//
//	smtp://[user[:password]@]host[:port][?tls=mandatory|opportunistic|none|implicit][&auth=plain|login|cram-md5|xoauth2|auto]
//
// User and password are percent-encoded. The port defaults to 587, or 465
// with tls=implicit; TLS defaults to mandatory STARTTLS; auth defaults to
// auto when a user is given. The scheme smtps means tls=implicit.
func ParseSMTPURL(raw string) (Server, error) {
	var c Server
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error quotes the whole URL, password included: say less.
		return c, fmt.Errorf("%w: malformed URL (percent-encode special characters in user and password)", ErrSMTPURL)
	}
	switch u.Scheme {
	case "smtp":
		c.TLS = TLSMandatory
	case "smtps":
		c.TLS = TLSImplicit
	default:
		return c, fmt.Errorf("%w: scheme must be smtp or smtps, got %q", ErrSMTPURL, sender.Clip(u.Scheme))
	}
	if u.Opaque != "" || u.Host == "" {
		return c, fmt.Errorf("%w: want smtp://host[:port]", ErrSMTPURL)
	}
	if u.Path != "" && u.Path != "/" || u.Fragment != "" {
		return c, fmt.Errorf("%w: unexpected path or fragment", ErrSMTPURL)
	}
	c.Host = u.Hostname()
	// A colon belongs only in an IPv6 literal: "smtp://::" would give the
	// host ":", which no dialer can reach and String cannot write back.
	if c.Host == "" || strings.ContainsFunc(c.Host, isSpaceOrControl) ||
		strings.Contains(c.Host, ":") && net.ParseIP(c.Host) == nil {
		return c, fmt.Errorf("%w: missing or invalid host", ErrSMTPURL)
	}
	if u.User != nil {
		c.Username = u.User.Username()
		c.Password, _ = u.User.Password()
		if c.Username == "" {
			return c, fmt.Errorf("%w: empty user name", ErrSMTPURL)
		}
		c.Auth = AuthAuto
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return c, fmt.Errorf("%w: malformed query", ErrSMTPURL)
	}
	for k, v := range q {
		if len(v) != 1 {
			return c, fmt.Errorf("%w: parameter %q given %d times", ErrSMTPURL, sender.Clip(k), len(v))
		}
		switch k {
		case "tls":
			if c.TLS, err = parseTLSMode(v[0]); err != nil {
				return c, err
			}
		case "auth":
			if c.Auth, err = parseAuth(v[0]); err != nil {
				return c, err
			}
		default:
			return c, fmt.Errorf("%w: unknown parameter %q (known: tls, auth)", ErrSMTPURL, sender.Clip(k))
		}
	}
	if c.Auth != AuthNone && c.Username == "" {
		return c, fmt.Errorf("%w: auth=%s needs a user in the URL", ErrSMTPURL, c.Auth)
	}
	c.Port = defaultPort
	if c.TLS == TLSImplicit {
		c.Port = implicitPort
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return c, fmt.Errorf("%w: port must be 1 to 65535", ErrSMTPURL)
		}
		c.Port = n
	}
	return c, nil
}

func parseTLSMode(s string) (TLSMode, error) {
	for m, name := range tlsModeNames {
		if s == name {
			return m, nil
		}
	}
	return 0, fmt.Errorf("%w: tls=%q, want mandatory, opportunistic, none or implicit", ErrSMTPURL, sender.Clip(s))
}

func parseAuth(s string) (AuthMethod, error) {
	switch a := AuthMethod(s); a {
	case AuthAuto, AuthPlain, AuthLogin, AuthCRAMMD5, AuthXOAuth2:
		return a, nil
	}
	return "", fmt.Errorf("%w: auth=%q, want plain, login, cram-md5, xoauth2 or auto", ErrSMTPURL, sender.Clip(s))
}

func isSpaceOrControl(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }

// Addr returns host:port.
func (c Server) Addr() string { return net.JoinHostPort(c.Host, strconv.Itoa(c.Port)) }

// String returns the URL with the password replaced by "xxxxx".
func (c Server) String() string {
	u := url.URL{Scheme: "smtp", Host: c.Addr()}
	if c.Username != "" {
		if c.Password != "" {
			u.User = url.UserPassword(c.Username, "xxxxx")
		} else {
			u.User = url.User(c.Username)
		}
	}
	q := url.Values{"tls": {c.TLS.String()}}
	if c.Auth != AuthNone {
		q.Set("auth", string(c.Auth))
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// GoString keeps %#v from printing the password.
func (c Server) GoString() string { return "smtp.Server(" + c.String() + ")" }

// LogValue logs the configuration without the password.
func (c Server) LogValue() slog.Value { return slog.StringValue(c.String()) }

// ReadSecretFile reads a password or token from a file, such as a mounted
// Kubernetes Secret, dropping one trailing newline. Errors name the path,
// never the content.
func ReadSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read secret file: %w", err)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if s == "" {
		return "", fmt.Errorf("secret file %s is empty", path)
	}
	return s, nil
}
