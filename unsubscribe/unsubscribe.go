// Package unsubscribe makes and checks the tokens of the one-click
// unsubscribe links (RFC 8058) that every digest carries when
// DIGEST_UNSUBSCRIBE_URL is set, and expands the URL template.
//
// A token names a customer without showing the customer id: it is the id
// encrypted with AES-256-GCM under a key of its own keyring
// (DIGEST_UNSUBSCRIBE_KEYS, never the ledger's HMAC keys), the nonce being
// an HMAC of the id (a synthetic IV, as in SIV mode: the same customer
// always gets the same token, and a token is only valid with the nonce its
// own plaintext gives). The key id comes first, so tokens made before a
// rotation still verify while their key is in the ring:
//
//	KID~BASE64URL(nonce[12] || ciphertext || tag[16])
//
// The plaintext is the id padded to a fixed length (the id, a NUL, zeros
// up to digest.MaxFieldLen+1 bytes), so every token of a key id has the
// same length and none tells how long its customer id is. Tokens made
// before the padding (the bare id sealed) still verify: a padded
// plaintext is the only kind of that length, and a customer id never holds
// a NUL.
//
// Tokens are URL-safe (letters, digits, '-', '_', '.', '~'). The web
// endpoint that receives the one-click POST checks a token with
// Keyring.Verify (or "digest unsubscribe-token --verify TOKEN") and learns
// the customer id; a changed byte, an unknown key id or a token made under
// another keyring is rejected.
package unsubscribe

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/weeklydigest/digest/digest"
)

// Labels of the two keys derived from each secret.
const (
	encLabel = "digest-unsubscribe-v1 encryption"
	ivLabel  = "digest-unsubscribe-v1 synthetic iv"
)

const (
	nonceLen = 12
	tagLen   = 16
	sep      = "~"
	// paddedLen is the length of every plaintext: a customer id (at most
	// digest.MaxFieldLen bytes), a NUL, and zeros.
	paddedLen = digest.MaxFieldLen + 1
	// MaxTokenLen bounds a token: a key id, the separator and the padded
	// plaintext sealed.
	MaxTokenLen = digest.MaxKeyIDLen + 1 + (nonceLen+paddedLen+tagLen+2)/3*4
)

type key struct {
	id   string
	aead cipher.AEAD
	iv   []byte
}

// Keyring holds the token keys, current first. It never prints them.
type Keyring struct {
	keys []key
}

// NewKeyring derives the token keys from kr (its own keyring, parsed with
// digest.ParseKeyring: "kid:base64secret[,...]", current first).
func NewKeyring(kr *digest.Keyring) (*Keyring, error) {
	enc, iv := kr.Derive(encLabel), kr.Derive(ivLabel)
	out := &Keyring{}
	for i := range enc {
		block, err := aes.NewCipher(enc[i].Key)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		out.keys = append(out.keys, key{id: enc[i].ID, aead: aead, iv: iv[i].Key})
	}
	return out, nil
}

// ParseKeyring parses a keyring in digest.ParseKeyring's format.
func ParseKeyring(s string) (*Keyring, error) {
	kr, err := digest.ParseKeyring(s)
	if err != nil {
		return nil, err
	}
	return NewKeyring(kr)
}

// ReadKeyringFile reads a keyring file in the same format.
func ReadKeyringFile(path string) (*Keyring, error) {
	kr, err := digest.ReadKeyringFile(path)
	if err != nil {
		return nil, err
	}
	return NewKeyring(kr)
}

// String names the key ids only.
func (kr *Keyring) String() string {
	ids := make([]string, len(kr.keys))
	for i, k := range kr.keys {
		ids[i] = k.id
	}
	return "unsubscribe.Keyring(" + strings.Join(ids, ",") + ")"
}

// GoString keeps %#v from printing keys.
func (kr *Keyring) GoString() string { return kr.String() }

func (k *key) nonce(customerID string) []byte {
	m := hmac.New(sha256.New, k.iv)
	m.Write([]byte(k.id))
	m.Write([]byte{0})
	m.Write([]byte(customerID))
	return m.Sum(nil)[:nonceLen]
}

// Token returns the token of customerID under the current key. The same
// customer always gets the same token (until the current key changes), of
// the same length as every other customer's. customerID is at most
// digest.MaxFieldLen bytes, as every valid identity's.
func (kr *Keyring) Token(customerID string) string {
	k := &kr.keys[0]
	n := k.nonce(customerID)
	plain := make([]byte, paddedLen)
	copy(plain, customerID)
	sealed := k.aead.Seal(n, n, plain, []byte(k.id))
	return k.id + sep + base64.RawURLEncoding.EncodeToString(sealed)
}

// unpad returns the customer id of a plaintext: a padded one's id, or a
// token made before the padding's whole plaintext.
func unpad(plain []byte) ([]byte, bool) {
	if len(plain) != paddedLen {
		return plain, true // made before the padding
	}
	i := bytes.IndexByte(plain, 0)
	if i < 0 || bytes.ContainsFunc(plain[i:], func(r rune) bool { return r != 0 }) {
		return nil, false
	}
	return plain[:i], true
}

// ErrInvalidToken is wrapped by every error of Verify.
var ErrInvalidToken = errors.New("invalid unsubscribe token")

// Verify checks a token and returns the customer id it was made for.
func (kr *Keyring) Verify(token string) (string, error) {
	if len(token) > MaxTokenLen {
		return "", fmt.Errorf("%w: longer than %d bytes", ErrInvalidToken, MaxTokenLen)
	}
	kid, b64, ok := strings.Cut(token, sep)
	if !ok {
		return "", fmt.Errorf("%w: want KID~DATA", ErrInvalidToken)
	}
	var k *key
	for i := range kr.keys {
		if kr.keys[i].id == kid {
			k = &kr.keys[i]
		}
	}
	if k == nil {
		return "", fmt.Errorf("%w: unknown key id", ErrInvalidToken)
	}
	// Strict rejects non-zero padding bits, but the decoder still skips
	// '\r' and '\n' anywhere in its input: compare with the canonical
	// spelling, so that one token has exactly one spelling.
	raw, err := base64.RawURLEncoding.Strict().DecodeString(b64)
	if err != nil || len(raw) < nonceLen+tagLen || base64.RawURLEncoding.EncodeToString(raw) != b64 {
		return "", fmt.Errorf("%w: malformed", ErrInvalidToken)
	}
	n := raw[:nonceLen]
	plain, err := k.aead.Open(nil, n, raw[nonceLen:], []byte(kid))
	if err != nil {
		return "", fmt.Errorf("%w: does not authenticate", ErrInvalidToken)
	}
	id, ok := unpad(plain)
	if !ok {
		return "", fmt.Errorf("%w: does not authenticate", ErrInvalidToken)
	}
	// The nonce must be the one the id gives: one token per customer.
	if subtle.ConstantTimeCompare(n, k.nonce(string(id))) != 1 {
		return "", fmt.Errorf("%w: does not authenticate", ErrInvalidToken)
	}
	return string(id), nil
}

// Placeholder is what a URL template holds where the token goes.
const Placeholder = "{token}"

// marker stands for Placeholder while a template is parsed as a URL.
const marker = "digestunsubscribetoken"

// Template is a validated unsubscribe URL template.
type Template struct {
	raw   string
	https bool
}

// ErrTemplate is wrapped by every error of ParseTemplate.
var ErrTemplate = errors.New("invalid unsubscribe URL template")

// ParseTemplate checks an unsubscribe URL template: an absolute https: URL
// with a host (and a port, if any, from 1 to 65535), or a mailto: URL,
// holding Placeholder at least once and only in its path or query (never
// in the host, where a token would pick the server, or the fragment,
// which a browser does not send), and no space, control character, '<',
// '>' or ',' (it becomes one entry of a List-Unsubscribe header).
func ParseTemplate(s string) (*Template, error) {
	switch {
	case !strings.Contains(s, Placeholder):
		return nil, fmt.Errorf("%w: %q has no %s", ErrTemplate, s, Placeholder)
	case strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f || r > 0x7e }),
		strings.ContainsAny(s, "<>,\""):
		return nil, fmt.Errorf("%w: %q holds a space, a control or non-ASCII character, or one of < > , \"", ErrTemplate, s)
	}
	u, err := url.Parse(strings.ReplaceAll(s, Placeholder, marker))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTemplate, err)
	}
	var t *Template
	switch {
	case u.Scheme == "https" && u.Host != "" && u.User == nil:
		t = &Template{raw: s, https: true}
	case u.Scheme == "mailto" && u.Opaque != "":
		t = &Template{raw: s}
	default:
		return nil, fmt.Errorf("%w: %q is not an https://host/... or mailto: URL", ErrTemplate, s)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%w: %q: port %s is not from 1 to 65535", ErrTemplate, s, p)
		}
	}
	// Every placeholder in the path (a mailto's address) or the query.
	inPlace := strings.Count(u.EscapedPath()+u.Opaque, marker) + strings.Count(u.RawQuery, marker)
	if strings.Count(s, Placeholder) != inPlace || strings.Contains(u.Host, marker) {
		return nil, fmt.Errorf("%w: %q: %s goes in the path or the query, never in the host, port or fragment", ErrTemplate, s, Placeholder)
	}
	return t, nil
}

// HTTPS reports whether the template is an https URL (one-click capable:
// RFC 8058 needs an HTTPS URI for List-Unsubscribe-Post).
func (t *Template) HTTPS() bool { return t.https }

// Expand returns the URL with token in place of every Placeholder. Tokens
// from Keyring.Token need no escaping.
func (t *Template) Expand(token string) string {
	return strings.ReplaceAll(t.raw, Placeholder, token)
}
