package unsubscribe_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/unsubscribe"
)

const (
	secretA = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	secretB = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="
)

func ring(t testing.TB, s string) *unsubscribe.Keyring {
	t.Helper()
	kr, err := unsubscribe.ParseKeyring(s)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

func TestTokenRoundTripHidesTheID(t *testing.T) {
	t.Parallel()
	kr := ring(t, "u1:"+secretA)
	seen := map[string]string{}
	for _, id := range []string{"cust_0001", "cust_0002", "c", "山田太郎", strings.Repeat("x", 200)} {
		tok := kr.Token(id)
		if tok != kr.Token(id) {
			t.Errorf("token of %q is not stable", id)
		}
		if (len(id) > 3 && strings.Contains(tok, id)) || len(tok) > unsubscribe.MaxTokenLen {
			t.Errorf("token %q shows the id or is too long", tok)
		}
		if url.PathEscape(tok) != tok || url.QueryEscape(tok) != tok {
			t.Errorf("token %q is not URL-safe", tok)
		}
		if other, dup := seen[tok]; dup {
			t.Errorf("%q and %q share a token", id, other)
		}
		seen[tok] = id
		got, err := kr.Verify(tok)
		if err != nil || got != id {
			t.Errorf("Verify(Token(%q)) = %q, %v", id, got, err)
		}
	}
}

// Every token of a key has one length, whatever the customer id's: the
// id is padded inside the ciphertext. Tokens made before the padding
// still verify, to the same customer.
func TestTokensHaveOneLengthAndOldOnesVerify(t *testing.T) {
	t.Parallel()
	kr := ring(t, "u1:"+secretA)
	want := len(kr.Token("c"))
	for _, id := range []string{"c", "cust_0001", "山田太郎", strings.Repeat("x", 199), strings.Repeat("y", 200)} {
		tok := kr.Token(id)
		if len(tok) != want {
			t.Errorf("token of a %d-byte id is %d bytes, that of a 1-byte id %d: the length shows the id's", len(id), len(tok), want)
		}
		old := unsubscribe.LegacyToken(kr, id)
		if old == tok {
			t.Fatalf("the legacy token of %q is the new one", id)
		}
		if got, err := kr.Verify(old); err != nil || got != id {
			t.Errorf("Verify(token made before the padding, %q) = %q, %v", id, got, err)
		}
	}
}

func TestTokenRotationAndTampering(t *testing.T) {
	t.Parallel()
	old := ring(t, "u1:"+secretA)
	rotated := ring(t, "u2:"+secretB+",u1:"+secretA)
	tok := old.Token("cust_0001")
	if id, err := rotated.Verify(tok); err != nil || id != "cust_0001" {
		t.Fatalf("old token after rotation: %q, %v", id, err)
	}
	if newTok := rotated.Token("cust_0001"); !strings.HasPrefix(newTok, "u2~") {
		t.Errorf("new token %q not under the current key", newTok)
	}
	// Keys of the same id but another secret, the ledger's keyring, or a
	// keyring without the old key: all refuse.
	for _, other := range []*unsubscribe.Keyring{ring(t, "u1:"+secretB), ring(t, "u2:"+secretB)} {
		if _, err := other.Verify(tok); !errors.Is(err, unsubscribe.ErrInvalidToken) {
			t.Errorf("%v verified a token of another keyring: %v", other, err)
		}
	}
	// Every single-character change is refused.
	alphabet := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_~"
	for i := range tok {
		for _, c := range []byte{alphabet[(strings.IndexByte(alphabet, tok[i])+1)%len(alphabet)]} {
			bad := tok[:i] + string(c) + tok[i+1:]
			if id, err := old.Verify(bad); err == nil {
				t.Fatalf("tampered token %q verified as %q", bad, id)
			}
		}
	}
	for _, bad := range []string{"", "u1", "u1~", "u1~" + strings.Repeat("A", 30), "zz~" + tok[3:], tok + "A", strings.Repeat("A", 1000)} {
		if _, err := old.Verify(bad); !errors.Is(err, unsubscribe.ErrInvalidToken) {
			t.Errorf("Verify(%q) = %v, want ErrInvalidToken", bad, err)
		}
	}
	if s := old.String() + " " + old.GoString(); strings.Contains(s, secretA) {
		t.Errorf("keyring prints its secret: %s", s)
	}
}

func TestParseTemplate(t *testing.T) {
	t.Parallel()
	for _, good := range []string{
		"https://example.com/u/{token}", "https://example.com/u?t={token}", "mailto:unsubscribe@example.com?subject={token}",
		"https://example.com:8443/u/{token}", "https://example.com:65535/u/{token}?again={token}",
	} {
		tpl, err := unsubscribe.ParseTemplate(good)
		if err != nil {
			t.Errorf("ParseTemplate(%q): %v", good, err)
			continue
		}
		if got := tpl.Expand("u1~abc"); got != strings.ReplaceAll(good, "{token}", "u1~abc") {
			t.Errorf("Expand = %q", got)
		}
		if tpl.HTTPS() != strings.HasPrefix(good, "https:") {
			t.Errorf("%q: HTTPS() = %v", good, tpl.HTTPS())
		}
	}
	for _, bad := range []string{
		"", "https://example.com/u", "http://example.com/u/{token}", "https:///u/{token}", "ftp://example.com/{token}",
		"https://example.com/u/{token}\r\nBcc: x@evil.test", "https://example.com/u/{token}>, <https://evil.test/",
		"https://example.com/u/{token} x", "https://user:pw@example.com/{token}", "/u/{token}", "mailto:?subject={token}",
		"https://exämple.com/{token}",
		// {token} in the host picks the server; a port must be 1-65535; a
		// fragment is not sent.
		"https://{token}.example.com/u", "https://example.com{token}/u", "https://example.com:99999/u/{token}",
		"https://example.com:0/u/{token}", "https://example.com/u#{token}", "https://example.com/{token}#{token}",
	} {
		if _, err := unsubscribe.ParseTemplate(bad); !errors.Is(err, unsubscribe.ErrTemplate) {
			t.Errorf("ParseTemplate(%q) = %v, want ErrTemplate", bad, err)
		}
	}
}

// FuzzVerifyToken: no input panics Verify; whatever verifies is the token
// of the id it names; a real token with bytes appended never verifies.
func FuzzVerifyToken(f *testing.F) {
	kr := ring(f, "u2:"+secretB+",u1:"+secretA)
	for _, s := range []string{kr.Token("cust_0001"), ring(f, "u1:"+secretA).Token("x"), unsubscribe.LegacyToken(kr, "cust_0001"),
		unsubscribe.LegacyToken(kr, ""), "u1~", "~", "u1~AAAA", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		id, err := kr.Verify(tok)
		if err != nil {
			if !errors.Is(err, unsubscribe.ErrInvalidToken) {
				t.Fatalf("error %v does not wrap ErrInvalidToken", err)
			}
			return
		}
		kid, _, _ := strings.Cut(tok, "~")
		if kid == "u2" && kr.Token(id) != tok && unsubscribe.LegacyToken(kr, id) != tok {
			t.Fatalf("%q verified as %q, whose token is %q (before the padding %q)", tok, id, kr.Token(id), unsubscribe.LegacyToken(kr, id))
		}
		if _, err := kr.Verify(tok + "A"); err == nil {
			t.Fatalf("%q with a byte appended verified", tok)
		}
	})
}

// FuzzParseTemplate: an accepted template expands to one header-safe URL.
func FuzzParseTemplate(f *testing.F) {
	for _, s := range []string{"https://example.com/u/{token}", "mailto:u@example.com?subject={token}", "https://e.com/{token}\r\n",
		"https://{token}.example.com/u", "https://example.com:99999/{token}", "https://example.com:443/u?t={token}#{token}"} {
		f.Add(s)
	}
	tok := ring(f, "u1:"+secretA).Token("cust_0001")
	f.Fuzz(func(t *testing.T, s string) {
		tpl, err := unsubscribe.ParseTemplate(s)
		if err != nil {
			return
		}
		u := tpl.Expand(tok)
		if strings.ContainsAny(u, "\r\n<>, ") || !strings.Contains(u, tok) {
			t.Fatalf("template %q expands to %q", s, u)
		}
		// The token lands in the path or query, never the host or port.
		if pu, err := url.Parse(u); err == nil && (strings.Contains(pu.Host, tok) || strings.Contains(pu.Fragment, tok)) {
			t.Fatalf("template %q puts the token in the host or fragment: %q", s, u)
		}
	})
}

// TestTokenWithLineBreaksIsRefused: Go's base64 decoder skips '\r' and
// '\n', so a token with one inserted would otherwise verify as a second
// spelling of the same token (found by FuzzVerifyToken).
func TestTokenWithLineBreaksIsRefused(t *testing.T) {
	t.Parallel()
	kr := ring(t, "u1:"+secretA)
	tok := kr.Token("cust_0001")
	for _, brk := range []string{"\r", "\n", "\r\n"} {
		for i := len("u1~") + 1; i < len(tok); i += 7 {
			bad := tok[:i] + brk + tok[i:]
			if id, err := kr.Verify(bad); err == nil {
				t.Fatalf("%q verified as %q", bad, id)
			}
		}
	}
	if id, err := kr.Verify(tok); err != nil || id != "cust_0001" {
		t.Fatalf("the token itself: %q, %v", id, err)
	}
}
