package digest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
)

// Message renders d into the message a run sends for it under key: the
// customer's address, the subject and both parts. unsubscribe is the
// recipient's own unsubscribe URI ("" for none): the message carries it
// for the List-Unsubscribe header, and an http(s) one is also a visible,
// translated link in both parts (see RenderFor).
func (r *Renderer) Message(d *Digest, key Key, unsubscribe string) (*Message, error) {
	out, err := r.RenderFor(d, unsubscribe)
	if err != nil {
		return nil, err
	}
	return &Message{
		Key:         key,
		To:          Address{Name: d.Customer.Name, Email: d.Customer.Email},
		Subject:     out.Subject,
		Text:        out.Text,
		HTML:        out.HTML,
		Unsubscribe: unsubscribe,
	}, nil
}

// TestKeyID is the key id of every TestKey.
const TestKeyID = "test"

// TestKey returns a fresh key for a test send (Message.Test): key id
// TestKeyID and a random hex part. A real key's hex part is an HMAC of the
// digest's identity; a random one is as unlikely to equal any as two HMACs
// are to collide, so a provider look-up of a real key (which matches the
// hex part, in the Message-ID and the tags) never finds a test, and two
// test sends of one digest are two messages.
func TestKey() Key {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	h := sha256.Sum256(append([]byte("digest test send\x00"), b...))
	return Key(TestKeyID + ":" + hex.EncodeToString(h[:]))
}
