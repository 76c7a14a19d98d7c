package digest

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSignRFC4231 checks the HMAC-SHA256 of sign against the test vectors
// of RFC 4231, section 4. Cases 1 to 5 have keys shorter than MinSecretLen
// and go to sign directly; cases 6 and 7 (131-byte keys) go through
// ParseKeyring, base64 and all.
func TestSignRFC4231(t *testing.T) {
	t.Parallel()
	aa131 := strings.Repeat("aa", 131)
	tests := []struct {
		name, keyHex, data, want string
		viaKeyring               bool
	}{
		{"case 1", strings.Repeat("0b", 20), "Hi There",
			"b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7", false},
		{"case 2", hex.EncodeToString([]byte("Jefe")), "what do ya want for nothing?",
			"5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", false},
		{"case 3", strings.Repeat("aa", 20), strings.Repeat("\xdd", 50),
			"773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe", false},
		{"case 4", "0102030405060708090a0b0c0d0e0f10111213141516171819", strings.Repeat("\xcd", 50),
			"82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b", false},
		// Case 5 specifies the output truncated to 128 bits.
		{"case 5", strings.Repeat("0c", 20), "Test With Truncation",
			"a3b6167473100ee06e0c796c2955552b", false},
		{"case 6", aa131, "Test Using Larger Than Block-Size Key - Hash Key First",
			"60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54", true},
		{"case 7", aa131, "This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before being used by the HMAC algorithm.",
			"9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := secret{id: "rfc", key: mustHex(t, tt.keyHex)}
			if tt.viaKeyring {
				kr, err := ParseKeyring("rfc:" + base64.StdEncoding.EncodeToString(s.key))
				if err != nil {
					t.Fatal(err)
				}
				s = kr.secrets[0]
			}
			k := sign(s, tt.data)
			if k.KeyID() != "rfc" || !strings.HasPrefix(k.Hex(), tt.want) || len(k.Hex()) != 64 {
				t.Errorf("sign = %s, want rfc:%s", k, tt.want)
			}
		})
	}
}

// canonicalSecret and canonicalKey: the expected hex was computed outside
// Go, with OpenSSL 3:
//
//	printf '%s' 'customer_8421|2026-W32|weekly_activity|v3' |
//	  openssl dgst -sha256 -hmac 'digest-test-secret-0123456789abcdef'
const (
	canonicalSecret = "digest-test-secret-0123456789abcdef" // 35 bytes
	canonicalKey    = "k1:059f6ccce2fae1e8f73668039e61058306cf82a01131cecc2b455aea17a665c4"
)

func TestKeyKnownExample(t *testing.T) {
	t.Parallel()
	kr, err := ParseKeyring("k1:" + base64.StdEncoding.EncodeToString([]byte(canonicalSecret)))
	if err != nil {
		t.Fatal(err)
	}
	id := Identity{Customer: "customer_8421", Week: ISOWeek{2026, 32}, Type: "weekly_activity", Version: "v3"}
	if err := id.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := id.Canonical(); got != "customer_8421|2026-W32|weekly_activity|v3" {
		t.Fatalf("Canonical = %q", got)
	}
	if got := kr.Key(id); got != canonicalKey {
		t.Errorf("Key = %s, want %s", got, canonicalKey)
	}
	if _, err := ParseKey(canonicalKey); err != nil {
		t.Errorf("ParseKey(Key) = %v", err)
	}
}

var identityCases = []struct {
	name          string
	customer, typ string
	version       string
	wantErr       string
}{
	{"valid", "customer_8421", "weekly_activity", "v3", ""},
	{"unicode", "Zoë-山田", "weekly_activity", "v1", ""},
	{"longest", strings.Repeat("c", MaxFieldLen), "t", "v", ""},
	{"empty customer", "", "weekly_activity", "v3", "customer is empty"},
	{"empty type", "c1", "", "v3", "type is empty"},
	{"empty version", "c1", "t", "", "version is empty"},
	{"pipe", "c1|2026-W01", "t", "v", "customer contains '|'"},
	{"pipe in version", "c1", "t", "v|1", "version contains '|'"},
	{"newline", "c1\n", "t", "v", "control character"},
	{"carriage return", "c\r1", "t", "v", "control character"},
	{"NUL", "c\x001", "t", "v", "control character"},
	{"DEL", "c\x7f", "t", "v", "control character"},
	{"C1 control", "c\u0085", "t", "v", "control character"},
	{"trailing space in version", "c1", "weekly_activity", "v1 ", "white space"},
	{"leading space in type", "c1", " weekly_activity", "v1", "white space"},
	{"trailing space in customer", "c1 ", "t", "v", "white space"},
	{"tab in type", "c1", "weekly\tactivity", "v", "control character"},
	{"too long", strings.Repeat("c", MaxFieldLen+1), "t", "v", "at most 200"},
	{"invalid UTF-8", "c\xff", "t", "v", "not valid UTF-8"},
}

func TestIdentityValidate(t *testing.T) {
	t.Parallel()
	for _, tt := range identityCases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id := Identity{Customer: tt.customer, Week: ISOWeek{2026, 48}, Type: tt.typ, Version: tt.version}
			err := id.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidIdentity) || !strings.Contains(fmt.Sprint(err), tt.wantErr) {
				t.Errorf("Validate = %v, want ErrInvalidIdentity saying %q", err, tt.wantErr)
			}
		})
	}
	if err := (Identity{Customer: "c", Type: "t", Version: "v"}).Validate(); !errors.Is(err, ErrInvalidIdentity) {
		t.Errorf("zero week: %v", err)
	}
}

func FuzzIdentityValidate(f *testing.F) {
	for _, tt := range identityCases {
		f.Add(tt.customer, tt.typ, tt.version)
	}
	f.Fuzz(func(t *testing.T, customer, typ, version string) {
		id := Identity{Customer: customer, Week: ISOWeek{2026, 48}, Type: typ, Version: version}
		if id.Validate() != nil {
			return
		}
		// A valid identity's canonical string splits back into its fields:
		// two valid identities never share one.
		parts := strings.Split(id.Canonical(), "|")
		if len(parts) != 4 || parts[0] != customer || parts[1] != "2026-W48" || parts[2] != typ || parts[3] != version {
			t.Fatalf("Canonical %q does not split back into %q", id.Canonical(), []string{customer, typ, version})
		}
	})
}

var parseKeyCases = []struct {
	in      string
	wantErr string
}{
	{canonicalKey, ""},
	{"2026-01_a.b:" + strings.Repeat("0", 64), ""},
	{strings.Repeat("k", MaxKeyIDLen) + ":" + strings.Repeat("f", 64), ""},
	{"", "want KID:HEX"},
	{"k1", "want KID:HEX"},
	{":" + strings.Repeat("0", 64), "key id must be 1 to 32"},
	{strings.Repeat("k", MaxKeyIDLen+1) + ":" + strings.Repeat("0", 64), "key id must be 1 to 32"},
	{"k 1:" + strings.Repeat("0", 64), "may hold only"},
	{"k1:" + strings.Repeat("0", 63), "64 lowercase hex"},
	{"k1:" + strings.Repeat("0", 65), "64 lowercase hex"},
	{"k1:" + strings.Repeat("A", 64), "64 lowercase hex"},
	{"k1:" + strings.Repeat("g", 64), "64 lowercase hex"},
	{"k1:k2:" + strings.Repeat("0", 61), "64 lowercase hex"},
}

func TestParseKey(t *testing.T) {
	t.Parallel()
	for _, tt := range parseKeyCases {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			k, err := ParseKey(tt.in)
			if tt.wantErr == "" {
				if err != nil || string(k) != tt.in {
					t.Fatalf("ParseKey = %q, %v", k, err)
				}
				if k.KeyID()+":"+k.Hex() != tt.in {
					t.Errorf("KeyID %q, Hex %q", k.KeyID(), k.Hex())
				}
				return
			}
			if !errors.Is(err, ErrInvalidKey) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseKey = %v, want ErrInvalidKey saying %q", err, tt.wantErr)
			}
		})
	}
}

func FuzzParseKey(f *testing.F) {
	for _, tt := range parseKeyCases {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("error %v does not wrap ErrInvalidKey", err)
			}
			return
		}
		if string(k) != s || k.KeyID()+":"+k.Hex() != s || len(k.Hex()) != 64 {
			t.Fatalf("ParseKey(%q) = %q (%q, %q)", s, k, k.KeyID(), k.Hex())
		}
	})
}

// b64 returns a base64 secret of n bytes, each byte c.
func b64(c byte, n int) string {
	return base64.StdEncoding.EncodeToString([]byte(strings.Repeat(string(rune(c)), n)))
}

func TestParseKeyringErrors(t *testing.T) {
	t.Parallel()
	short := base64.StdEncoding.EncodeToString([]byte("s3cr3t-but-too-short"))
	tests := []struct {
		name, in, wantErr string
	}{
		{"empty", "", "no keys"},
		{"only separators", " , \n,", "no keys"},
		{"no colon", b64('x', 32), "entry 1: want kid:base64secret"},
		{"empty kid", ":" + b64('x', 32), "key id must be 1 to 32"},
		{"bad kid", "k 1:" + b64('x', 32), "may hold only"},
		{"secret as kid", "c2VjcmV0+/=:" + b64('x', 32), "may hold only"},
		{"too short", "k1:" + short, "secret is 20 bytes, at least 32"},
		{"empty secret", "k1:", "secret is 0 bytes"},
		{"bad base64", "k1:not*base64*at*all*but*long*enough*to*be*a*secret", "secret is not base64"},
		{"duplicate kid", "k1:" + b64('x', 32) + ",k1:" + b64('y', 32), `key id "k1" appears twice`},
		{"second entry bad", "k1:" + b64('x', 32) + ",k2:" + short, `key id "k2"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			kr, err := ParseKeyring(tt.in)
			if err == nil {
				t.Fatalf("ParseKeyring = %v, want an error", kr)
			}
			if !errors.Is(err, ErrKeyring) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q, want ErrKeyring saying %q", err, tt.wantErr)
			}
			for _, leak := range []string{short, "s3cr3t", b64('x', 32), "c2VjcmV0", "not*base64"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("error %q shows secret material %q", err, leak)
				}
			}
		})
	}
}

func TestKeyringNeverPrintsSecrets(t *testing.T) {
	t.Parallel()
	raw := "correct-horse-battery-staple-0123456789"
	enc := base64.StdEncoding.EncodeToString([]byte(raw))
	kr, err := ParseKeyring("new:" + enc + ", old:" + b64('o', 40))
	if err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		out := fmt.Sprintf(verb, kr)
		for _, leak := range []string{raw, enc, "horse", hex.EncodeToString([]byte(raw))[:16], b64('o', 40)} {
			if strings.Contains(out, leak) {
				t.Errorf("Sprintf(%s) = %q shows a secret", verb, out)
			}
		}
	}
	if got := fmt.Sprint(kr); got != "Keyring(new,old)" {
		t.Errorf("String = %q", got)
	}
	if _, err := ReadKeyringFile("/nonexistent/keyring"); err == nil || !errors.Is(err, ErrKeyring) {
		t.Errorf("ReadKeyringFile of a missing file = %v", err)
	}
}

func TestKeyringRotation(t *testing.T) {
	t.Parallel()
	oldOnly, err := ParseKeyring("2025:" + b64('o', 32))
	if err != nil {
		t.Fatal(err)
	}
	// After the rotation the new key comes first, the old one stays;
	// URL-safe unpadded base64 and newlines (a mounted file) are accepted.
	rotated, err := ParseKeyring("2026:" + base64.RawURLEncoding.EncodeToString([]byte(strings.Repeat("\xfb", 33))) + "\n2025:" + b64('o', 32) + "\n")
	if err != nil {
		t.Fatal(err)
	}
	id := Identity{Customer: "customer_8421", Week: ISOWeek{2026, 32}, Type: "weekly_activity", Version: "v3"}
	c := rotated.Candidates(id)
	if len(c) != 2 || c[0] != rotated.Key(id) || c[0].KeyID() != "2026" || rotated.CurrentID() != "2026" {
		t.Fatalf("Candidates = %v, want the current key first", c)
	}
	if c[1] != oldOnly.Key(id) {
		t.Errorf("Candidates[1] = %s, want the key under the old secret %s", c[1], oldOnly.Key(id))
	}
	if ids := rotated.IDs(); len(ids) != 2 || ids[0] != "2026" || ids[1] != "2025" {
		t.Errorf("IDs = %v", ids)
	}
	other := id
	other.Version = "v4"
	if rotated.Key(other) == rotated.Key(id) {
		t.Error("a different identity has the same key")
	}
}

func TestRedactAddress(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ s, email, want string }{
		{"550 <Ada@Example.com>: no such user ada@example.com", "ada@example.com", "550 <<address>>: no such user <address>"},
		{"550 mailbox unavailable", "ada@example.com", "550 mailbox unavailable"},
		{"ünïcode ada@example.com", "ada@example.com", "ünïcode <address>"},
		{"x", "", "x"},
	} {
		if got := RedactAddress(tt.s, tt.email); got != tt.want {
			t.Errorf("RedactAddress(%q, %q) = %q, want %q", tt.s, tt.email, got, tt.want)
		}
	}
}

// A keyring's reused HMACs sign as a new one does, again and again and
// from many goroutines at once.
func TestSignReusesHMACs(t *testing.T) {
	t.Parallel()
	kr, err := ParseKeyring("k1:" + base64.StdEncoding.EncodeToString([]byte(canonicalSecret)) + ",k0:" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", 200))))
	if err != nil {
		t.Fatal(err)
	}
	ids := []Identity{
		{Customer: "customer_8421", Week: ISOWeek{2026, 32}, Type: "weekly_activity", Version: "v3"},
		{Customer: strings.Repeat("c", 300), Week: ISOWeek{2026, 1}, Type: "t", Version: "v1"}, // past sign's stack buffer
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range 200 {
				id := ids[i%len(ids)]
				for j, k := range kr.Candidates(id) {
					fresh := secret{id: kr.secrets[j].id, key: kr.secrets[j].key} // no pool: a new HMAC
					if want := sign(fresh, id.Canonical()); k != want {
						t.Errorf("reused HMAC signed %s, a new one %s", k, want)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if got := kr.Key(ids[0]); string(got) != canonicalKey {
		t.Errorf("Key = %s, want %s", got, canonicalKey)
	}
}
