// Package smtp delivers digests over SMTP: go-mail over a pool of
// persistent connections, one process-wide rate limiter, the SMTP URL, the
// connection check of a dry run, and the classification of every failure
// into the domain's accepted / temporary / permanent / ambiguous. It also
// renders the RFC 5322 message (Envelope), which the file outbox stores as
// is, so that both send the same bytes.
//
// Every message carries its digest key three ways: the Message-ID
// (<hex@from-domain>, the same on every retry), X-Digest-Key, and the
// provider-specific headers a look-up searches by (Mailpit's X-Tags,
// Postmark's X-PM-Metadata-digest-key; see package lookup).
//
// Nothing here logs or returns the SMTP password, and no error text
// carries a recipient address: errors end up in the ledger.
package smtp
