package digest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Part names, in the order FingerprintParts lists them: what a quarantine
// says changed (ledger.QuarantineDetail).
var PartNames = []string{"address", "name", "content"}

// FingerprintParts returns a check of each part of d, to tell which one
// changed when the fingerprint did: "address=H name=H content=H", each H
// eight hex digits of the HMAC-SHA256, under kr's current secret, of the
// address (in lower case), the name, and the canonical encoding without
// either (the activity, the locale, the week's bounds). Keyed and short,
// it says whether a part changed without letting anyone who reads the
// ledger test a guess of the address or name.
func (kr *Keyring) FingerprintParts(d *Digest) string {
	rest := *d
	rest.Customer.Email, rest.Customer.Name = "", ""
	var canon [2048]byte // the encoding of a typical digest, on the stack
	values := [...][]byte{[]byte(strings.ToLower(d.Customer.Email)), []byte(d.Customer.Name), rest.appendCanonical(canon[:0])}
	s := kr.secrets[0]
	sg := &signer{}
	if s.signers != nil {
		sg = s.signers.Get().(*signer)
		defer s.signers.Put(sg)
	} else {
		sg.mac = hmac.New(sha256.New, s.key)
	}
	out := make([]byte, 0, len("address=12345678 name=12345678 content=12345678"))
	for i, name := range PartNames {
		if i > 0 {
			out = append(out, ' ')
		}
		sg.mac.Reset()
		sg.mac.Write(append(append(append(sg.buf[:0], "fingerprint-part|"...), name...), '|'))
		sg.mac.Write(values[i])
		sum := sg.mac.Sum(sg.sum[:0])
		out = hex.AppendEncode(append(append(out, name...), '='), sum[len(sum)-4:])
	}
	return string(out)
}

// ChangedParts names the parts whose checks differ between two
// FingerprintParts values, in PartNames order; nil when either is empty
// (a receipt claimed before its parts were recorded) or none differs.
func ChangedParts(stored, claimed string) []string {
	if stored == "" || claimed == "" {
		return nil
	}
	a, b := strings.Fields(stored), strings.Fields(claimed)
	var out []string
	for _, name := range PartNames {
		if partOf(a, name) != partOf(b, name) {
			out = append(out, name)
		}
	}
	return out
}

func partOf(fields []string, name string) string {
	for _, f := range fields {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return v
		}
	}
	return ""
}
