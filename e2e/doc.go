// Package e2e holds end-to-end tests: the real digest binary, run as a
// subprocess against real PostgreSQL and a real Mailpit, as a CronJob or an
// operator would run it. It has no non-test code.
package e2e
