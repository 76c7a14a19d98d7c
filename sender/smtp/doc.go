// Package smtp is the SMTP adapter: it delivers digests to an SMTP server
// (a relay or a provider's submission port) with go-mail over a pool of
// persistent connections, pipelining MAIL, RCPT and DATA or sending BDAT,
// under one process-wide rate limiter. It also holds the SMTP URL
// (ParseSMTPURL), the connection check of a dry run, and the
// classification of every failure into the domain's accepted / temporary
// / permanent / ambiguous. The message itself, headers and MIME parts,
// comes from package sender (Letter), so that the file outbox stores the
// same bytes.
//
// Nothing here logs or returns the SMTP password, and no error text
// carries a recipient address: errors end up in the ledger.
package smtp
