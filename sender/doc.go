// Package sender delivers digests and asks providers about them: SMTP
// through go-mail over a pool of persistent connections, one process-wide
// rate limiter, the classification of every failure into the domain's
// accepted / temporary / permanent / ambiguous, look-ups by key in Mailpit
// and Postmark, and the file outbox used when no SMTP server is configured.
//
// Every message carries its digest key three ways: the Message-ID
// (<hex@from-domain>, the same on every retry), X-Digest-Key, and the
// provider-specific headers a look-up searches by (Mailpit's X-Tags,
// Postmark's X-PM-Metadata-digest-key).
//
// Nothing here logs or returns the SMTP password or an API token, and no
// error text carries a recipient address: errors end up in the ledger.
package sender
