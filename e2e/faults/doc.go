// Package faults is the crash, fault and replay suite: the real digest
// binary (and, where a clock must move, the run loop in-process) against
// real PostgreSQL and Mailpit, killed with SIGKILL at seeded random
// moments, with SMTP connections cut after the message data, the SMTP
// server down, PostgreSQL connections terminated or cut by a proxy, a
// look-up endpoint answering 429, and the same week replayed after the
// queue window. Every test ends by counting Mailpit's messages against the
// customers that must get one: zero duplicates, zero lost.
//
// DIGEST_CRASH_SEED replays a crash run's kill schedule (each test prints
// its seed); DIGEST_SOAK=1 runs the long mode (more customers and kills).
// It has no non-test code.
package faults
