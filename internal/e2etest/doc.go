// Package e2etest is the end-to-end harness shared by the test packages
// that run the real digest binary (e2e/, e2e/faults): it builds the binary
// once per test binary (Main), gives each test a fresh PostgreSQL schema, a
// Mailpit and the digest environment pointing at them (NewEnv), seeds
// synthetic customers, runs commands and checks Mailpit for exactly-once
// delivery.
//
// It is test-only code: nothing outside _test.go files imports it.
package e2etest
