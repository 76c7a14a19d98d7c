package digest

import (
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseKeyring checks that no keyring string panics the parser, that
// an accepted keyring has a valid current key id and signs, and that no
// error shows the secret it was given.
func FuzzParseKeyring(f *testing.F) {
	secret := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	for _, s := range []string{
		"k1:" + secret,
		"k2:" + secret + ",k1:" + secret,
		"k1:" + secret + ",k1:" + secret,
		"k1:c2hvcnQ=",
		"k1:%%%",
		":" + secret,
		"k|1:" + secret,
		"",
		" k1:" + secret + " ",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		kr, err := ParseKeyring(s)
		if err != nil {
			parts := strings.Split(s, ",")
			// A valid key id is named in errors, quoted; a secret found in a
			// key id as the error spells it (its own or another entry's,
			// quotes included: "\"000…" in key id "000…") is not a leak.
			namedAsKeyID := func(sec string) bool {
				for _, part := range parts {
					if kid, _, _ := strings.Cut(part, ":"); strings.Contains(strconv.Quote(kid), sec) {
						return true
					}
				}
				return false
			}
			for _, part := range parts {
				_, sec, ok := strings.Cut(part, ":")
				if ok && len(sec) >= 16 && strings.Contains(err.Error(), sec) && !namedAsKeyID(sec) {
					t.Fatalf("error %q shows the secret %q", err, sec)
				}
			}
			return
		}
		if validateKeyID(kr.CurrentID()) != nil {
			t.Fatalf("accepted %q with current key id %q", s, kr.CurrentID())
		}
		k := kr.Key(Identity{Customer: "c", Week: ISOWeek{2026, 48}, Type: "t", Version: "v"})
		if _, err := ParseKey(string(k)); err != nil {
			t.Fatalf("key %q of an accepted keyring does not parse: %v", k, err)
		}
		for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' }) {
			_, sec, ok := strings.Cut(part, ":")
			if sec = strings.TrimSpace(sec); ok && len(sec) >= 16 && strings.Contains(kr.String(), sec) {
				t.Fatalf("Keyring.String %q shows a secret", kr.String())
			}
		}
	})
}
