// Package digest is the domain of the weekly digest job: ISO weeks, business
// identities and their keyed hashes, building a digest from a fixed snapshot,
// its canonical encoding and fingerprint, rendering, and the run loop.
//
// It knows no database, SMTP server or HTTP API. It declares the small
// interfaces it consumes (Ledger, Mailer, Lookup, Source); the adapters in
// packages ledger, sender and snapshot implement them.
package digest
