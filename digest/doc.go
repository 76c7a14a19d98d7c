// Package digest is the domain of the weekly digest job: ISO weeks, business
// identities and their keyed hashes, building a digest from a fixed snapshot,
// its canonical encoding and fingerprint, rendering, and the states and
// outcomes of a receipt.
//
// It knows no database, SMTP server or HTTP API, and runs nothing
// concurrently: it declares the small interfaces the job consumes (Ledger,
// Mailer, Lookup, Source), which the adapters in packages ledger, sender
// and snapshot implement, and package run drives them.
package digest
