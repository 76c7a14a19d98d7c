// Package sender owns the message as it is sent, whatever sends it: the
// envelope (From, Message-ID, List-Unsubscribe), the checks of an address
// (ValidateAddress), header text (HeaderText, Clip), the headers that
// carry the digest key to every provider (X-Digest-Key, Mailpit's X-Tags,
// Postmark's metadata, SendGrid's, Mailgun's and SES's), and the MIME
// composition of a digest.Message (Letter.Compose, byte for byte what
// go-mail writes; Render for a whole RFC 5322 file).
//
// The adapters below it each talk to one external system and import only
// this package and digest, never each other:
//
//	sender/smtp      the SMTP mailer (digest.Mailer)
//	sender/outbox    the file outbox, a directory of .eml files (digest.Mailer and digest.Lookup)
//	sender/mailpit   Mailpit's API (digest.Lookup, by the X-Tags tag)
//	sender/postmark  Postmark's API (digest.Lookup, by the metadata)
//	sender/events    the provider events the ledger holds (digest.Lookup)
//
// sender/lookupurl only wires: it picks the look-up DIGEST_LOOKUP_URL
// names. What two look-ups share stays here (ProbeKey, CheckReachable) or,
// for the HTTP APIs' plumbing, in sender/internal/httpapi.
//
// Every message carries its digest key three ways: the Message-ID
// (<hex@from-domain>, the same on every retry), X-Digest-Key, and the
// provider-specific headers a look-up searches by.
package sender
