package unsubscribe

import "encoding/base64"

// LegacyToken is the token Token made before the padding: the bare id
// sealed under the current key. Such tokens are in mailboxes and must
// still verify.
func LegacyToken(kr *Keyring, customerID string) string {
	k := &kr.keys[0]
	n := k.nonce(customerID)
	sealed := k.aead.Seal(n, n, []byte(customerID), []byte(k.id))
	return k.id + sep + base64.RawURLEncoding.EncodeToString(sealed)
}
