package digest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// MaxFieldLen bounds each field of an Identity, in bytes.
const MaxFieldLen = 200

// MinSecretLen is the least number of decoded bytes a keyring secret must have.
const MinSecretLen = 32

// Identity is the business identity of one intended digest:
// customer|iso_week|digest_type|content_version. Every retry of the same
// digest computes the same Identity; nothing about the run, the pod or the
// time of arrival belongs in it.
type Identity struct {
	Customer string
	Week     ISOWeek
	Type     string
	Version  string
}

// ErrInvalidIdentity is wrapped by every error Identity.Validate returns.
var ErrInvalidIdentity = errors.New("invalid business identity")

// Validate checks each field: non-empty, at most MaxFieldLen bytes, valid
// UTF-8, free of '|' and control characters (which would make two
// identities share one canonical string), and without leading or trailing
// white space (an invisible difference that would make a new key).
func (id Identity) Validate() error {
	if id.Week.IsZero() {
		return fmt.Errorf("%w: week is missing", ErrInvalidIdentity)
	}
	for _, f := range []struct{ name, v string }{
		{"customer", id.Customer}, {"type", id.Type}, {"version", id.Version},
	} {
		if err := validateField(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

func validateField(name, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%w: %s is empty", ErrInvalidIdentity, name)
	case len(v) > MaxFieldLen:
		return fmt.Errorf("%w: %s is %d bytes, at most %d allowed", ErrInvalidIdentity, name, len(v), MaxFieldLen)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidIdentity, name)
	case strings.ContainsRune(v, '|'):
		return fmt.Errorf("%w: %s contains '|'", ErrInvalidIdentity, name)
	case strings.ContainsFunc(v, unicode.IsControl):
		return fmt.Errorf("%w: %s contains a control character", ErrInvalidIdentity, name)
	case strings.TrimSpace(v) != v:
		// "v1 " would be a new business key: the whole week sent again.
		return fmt.Errorf("%w: %s %q has leading or trailing white space", ErrInvalidIdentity, name, v)
	}
	return nil
}

// Canonical returns the four fields joined by '|'. It is the HMAC input and
// must never be stored: it names the customer.
func (id Identity) Canonical() string {
	var buf [128]byte
	b := append(buf[:0], id.Customer...)
	b = append(b, '|')
	b = appendWeek(b, id.Week)
	b = append(b, '|')
	b = append(b, id.Type...)
	b = append(b, '|')
	b = append(b, id.Version...)
	return string(b)
}

// Key is the stored form of a business identity: "KID:HEX", HEX being the
// lowercase hex HMAC-SHA256 of the canonical identity under the secret of
// key id KID. A Key reveals nothing about the customer.
type Key string

// KeyID returns the key id part of k.
func (k Key) KeyID() string {
	kid, _, _ := strings.Cut(string(k), ":")
	return kid
}

// Hex returns the HMAC part of k.
func (k Key) Hex() string {
	_, h, _ := strings.Cut(string(k), ":")
	return h
}

// ErrInvalidKey is wrapped by ParseKey's errors.
var ErrInvalidKey = errors.New("invalid key")

// ParseKey checks that s has the form KID:HEX with a valid key id and 64
// lowercase hex digits.
func ParseKey(s string) (Key, error) {
	kid, h, ok := strings.Cut(s, ":")
	if !ok {
		return "", fmt.Errorf("%w %q: want KID:HEX", ErrInvalidKey, s)
	}
	if err := validateKeyID(kid); err != nil {
		return "", fmt.Errorf("%w %q: %v", ErrInvalidKey, s, err)
	}
	if len(h) != 2*sha256.Size || strings.ToLower(h) != h {
		return "", fmt.Errorf("%w %q: want %d lowercase hex digits after the colon", ErrInvalidKey, s, 2*sha256.Size)
	}
	if _, err := hex.DecodeString(h); err != nil {
		return "", fmt.Errorf("%w %q: want %d lowercase hex digits after the colon", ErrInvalidKey, s, 2*sha256.Size)
	}
	return Key(s), nil
}

// MaxKeyIDLen bounds a key id, in bytes.
const MaxKeyIDLen = 32

func validateKeyID(kid string) error {
	if kid == "" || len(kid) > MaxKeyIDLen {
		return fmt.Errorf("key id must be 1 to %d characters", MaxKeyIDLen)
	}
	for _, c := range kid {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			// The id is not quoted: in a mistyped keyring entry it may be
			// (part of) a secret.
			return errors.New("key id may hold only letters, digits, '-', '_' and '.'")
		}
	}
	return nil
}

type secret struct {
	id  string
	key []byte
	// signers hold HMACs keyed with key, reused across signatures:
	// hmac.New costs about eight allocations, a keyed HMAC's Reset none
	// (it restores the state saved after keying). A pointer, shared by
	// the copies of the secret (Pinned); nil in a secret made without
	// newSecret, which then signs with a new HMAC.
	signers *sync.Pool
}

// signer is an HMAC with the buffers sign passes it: through the
// hash.Hash interface they would escape, an allocation each.
type signer struct {
	mac hash.Hash
	buf [256]byte
	sum [sha256.Size]byte
}

func newSecret(id string, key []byte) secret {
	return secret{id: id, key: key, signers: &sync.Pool{New: func() any { return &signer{mac: hmac.New(sha256.New, key)} }}}
}

// Keyring holds the HMAC secrets: the first is current and signs new claims;
// the others are older ones, kept so that a receipt stored before a rotation
// is still found. A Keyring never prints its secrets: String and GoString
// name only the key ids.
type Keyring struct {
	secrets []secret
}

// ErrKeyring is wrapped by every keyring parsing error. No error message
// contains secret material.
var ErrKeyring = errors.New("invalid HMAC keyring")

// ParseKeyring parses "kid:base64secret" entries separated by commas (or
// newlines, for a mounted file), the first one current. Each secret is
// standard or URL-safe base64, padded or not, and at least MinSecretLen bytes
// once decoded. Key ids must be unique.
func ParseKeyring(s string) (*Keyring, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' })
	kr := &Keyring{}
	seen := map[string]bool{}
	for i, f := range fields {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		kid, b64, ok := strings.Cut(f, ":")
		kid = strings.TrimSpace(kid)
		if !ok {
			return nil, fmt.Errorf("%w: entry %d: want kid:base64secret", ErrKeyring, i+1)
		}
		if err := validateKeyID(kid); err != nil {
			return nil, fmt.Errorf("%w: entry %d: %v", ErrKeyring, i+1, err)
		}
		if seen[kid] {
			return nil, fmt.Errorf("%w: key id %q appears twice", ErrKeyring, kid)
		}
		seen[kid] = true
		key, err := decodeSecret(strings.TrimSpace(b64))
		if err != nil {
			return nil, fmt.Errorf("%w: key id %q: secret is not base64", ErrKeyring, kid)
		}
		if len(key) < MinSecretLen {
			return nil, fmt.Errorf("%w: key id %q: secret is %d bytes, at least %d required (generate one with: head -c 32 /dev/urandom | base64)", ErrKeyring, kid, len(key), MinSecretLen)
		}
		kr.secrets = append(kr.secrets, newSecret(kid, key))
	}
	if len(kr.secrets) == 0 {
		return nil, fmt.Errorf("%w: no keys (want kid:base64secret[,kid:base64secret...])", ErrKeyring)
	}
	return kr, nil
}

func decodeSecret(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}

// ReadKeyringFile reads a keyring in ParseKeyring's format from a file, such
// as a mounted Kubernetes Secret.
func ReadKeyringFile(path string) (*Keyring, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyring, err) // *fs.PathError names the file
	}
	kr, err := ParseKeyring(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return kr, nil
}

// CurrentID returns the key id that signs new claims.
func (kr *Keyring) CurrentID() string { return kr.secrets[0].id }

// IDs returns all key ids, current first.
func (kr *Keyring) IDs() []string {
	ids := make([]string, len(kr.secrets))
	for i, s := range kr.secrets {
		ids[i] = s.id
	}
	return ids
}

// Key returns the stored key of id under the current secret. The identity
// must be valid (see Identity.Validate).
func (kr *Keyring) Key(id Identity) Key {
	return sign(kr.secrets[0], id.Canonical())
}

// Candidates returns the keys of id under every secret, current first: the
// places a receipt for id may be stored after one or more rotations.
func (kr *Keyring) Candidates(id Identity) []Key {
	c := id.Canonical()
	keys := make([]Key, len(kr.secrets))
	for i, s := range kr.secrets {
		keys[i] = sign(s, c)
	}
	return keys
}

// Pinned returns the keyring with key id kid moved to the front, the
// others in their order, so that Key and Candidates put kid first; false
// when the keyring does not hold kid. A week's receipts are all created
// under the key id pinned with the week (WeekPin.KeyID), whatever the
// order of the keyring a later run is given.
func (kr *Keyring) Pinned(kid string) (*Keyring, bool) {
	for i, s := range kr.secrets {
		if s.id == kid {
			out := &Keyring{secrets: make([]secret, 0, len(kr.secrets))}
			out.secrets = append(out.secrets, s)
			out.secrets = append(out.secrets, kr.secrets[:i]...)
			out.secrets = append(out.secrets, kr.secrets[i+1:]...)
			return out, true
		}
	}
	return nil, false
}

func sign(s secret, canonical string) Key {
	var sg *signer
	if s.signers != nil {
		sg = s.signers.Get().(*signer)
		sg.mac.Reset()
		defer s.signers.Put(sg)
	} else {
		sg = &signer{mac: hmac.New(sha256.New, s.key)}
	}
	sg.mac.Write(append(sg.buf[:0], canonical...))
	b := append(sg.buf[:0], s.id...)
	b = append(b, ':')
	b = hex.AppendEncode(b, sg.mac.Sum(sg.sum[:0]))
	return Key(b)
}

// String names the key ids only.
func (kr *Keyring) String() string {
	return "Keyring(" + strings.Join(kr.IDs(), ",") + ")"
}

// GoString keeps %#v from printing secrets.
func (kr *Keyring) GoString() string { return kr.String() }

// DerivedKey is a key made from one keyring secret for another purpose.
type DerivedKey struct {
	ID  string // the key id of the secret it was derived from
	Key []byte // HMAC-SHA256(secret, label): 32 bytes
}

// Derive returns, for each secret (current first), HMAC-SHA256(secret,
// label): keys for another purpose (package unsubscribe's tokens) that
// rotate like the ring, never the secrets themselves.
func (kr *Keyring) Derive(label string) []DerivedKey {
	out := make([]DerivedKey, len(kr.secrets))
	for i, s := range kr.secrets {
		m := hmac.New(sha256.New, s.key)
		m.Write([]byte(label))
		out[i] = DerivedKey{ID: s.id, Key: m.Sum(nil)}
	}
	return out
}

// RedactAddress replaces email in s (an SMTP reply often repeats the
// recipient's address), in any case, with "<address>".
func RedactAddress(s, email string) string {
	if email == "" {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if i+len(email) <= len(s) && strings.EqualFold(s[i:i+len(email)], email) {
			b.WriteString("<address>")
			i += len(email)
			continue
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// AddressKey returns the key of an email address under the current secret:
// "KID:HEX", HEX the lowercase hex HMAC-SHA256 of "address|" and the
// address in lower case. A permanent rejection is logged with it instead of
// the address, so that it can be matched against the customers' addresses
// (docs/operations.md, "Unsubscribe links and suppression") without the
// log holding any.
func (kr *Keyring) AddressKey(email string) string {
	return string(sign(kr.secrets[0], "address|"+strings.ToLower(email)))
}
