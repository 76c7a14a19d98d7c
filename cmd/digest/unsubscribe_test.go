package main

import (
	"strings"
	"testing"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/run"
)

const testUnsubKeys = "u1:ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="

func TestUnsubscribeTokenCommand(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"DIGEST_UNSUBSCRIBE_KEYS": testUnsubKeys, "DIGEST_UNSUBSCRIBE_URL": "https://example.com/u/{token}"}
	code, out, errOut := runMain(t, vars, "unsubscribe-token", "cust_0001")
	lines := strings.Fields(out)
	if code != 0 || len(lines) != 2 || lines[1] != "https://example.com/u/"+lines[0] || strings.Contains(out, "cust_0001") {
		t.Fatalf("exit %d, %q (%s)", code, out, errOut)
	}
	code, out, errOut = runMain(t, vars, "unsubscribe-token", "--verify", lines[0])
	if code != 0 || out != "cust_0001\n" {
		t.Fatalf("--verify: exit %d, %q (%s)", code, out, errOut)
	}
	tampered := lines[0][:len(lines[0])-2] + "AA"
	if code, out, _ = runMain(t, vars, "unsubscribe-token", "--verify", tampered); code != ExitFailure || out != "" {
		t.Fatalf("--verify of a tampered token: exit %d, %q; want 1 and nothing", code, out)
	}
	// Rotation: a new current key; the old token still verifies.
	rotated := map[string]string{"DIGEST_UNSUBSCRIBE_KEYS": "u2:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=," + testUnsubKeys}
	if code, out, _ = runMain(t, rotated, "unsubscribe-token", "--verify", lines[0]); code != 0 || out != "cust_0001\n" {
		t.Fatalf("--verify after rotation: exit %d, %q", code, out)
	}
	for _, args := range [][]string{{"unsubscribe-token"}, {"unsubscribe-token", "a", "b"}, {"unsubscribe-token", "a", "--verify", "x"}} {
		if code, _, _ := runMain(t, vars, args...); code != ExitUsage {
			t.Errorf("digest %v: exit %d, want 2", args, code)
		}
	}
	if code, _, errOut := runMain(t, nil, "unsubscribe-token", "cust_0001"); code != ExitUsage || !strings.Contains(errOut, "DIGEST_UNSUBSCRIBE_KEYS") {
		t.Errorf("no keyring: exit %d, %q", code, errOut)
	}
	// The run's refusal of an unsubscribe keyring holding the ledger's
	// secret, here too, for making a token and for checking one.
	shared := map[string]string{"DIGEST_HMAC_KEYS": testKeys, "DIGEST_UNSUBSCRIBE_KEYS": "u9:" + strings.TrimPrefix(testKeys, "k1:")}
	for _, args := range [][]string{{"unsubscribe-token", "cust_0001"}, {"unsubscribe-token", "--verify", lines[0]}} {
		if code, out, errOut := runMain(t, shared, args...); code != ExitUsage || out != "" || !strings.Contains(errOut, "shares a secret with the HMAC keyring") {
			t.Errorf("digest %v with the ledger's secret: exit %d, %q, %q; want 2, refused", args, code, out, errOut)
		}
	}
}

// A run refuses a bad unsubscribe configuration before doing anything.
func TestRunRefusesBadUnsubscribeConfig(t *testing.T) {
	t.Parallel()
	base := map[string]string{"DIGEST_HMAC_KEYS": testKeys, "DIGEST_LEDGER_PATH": t.TempDir() + "/l.db", "DIGEST_OUTBOX_DIR": t.TempDir()}
	for name, tc := range map[string]struct{ url, keys, want string }{
		"http":            {"http://example.com/u/{token}", testUnsubKeys, "not an https"},
		"no placeholder":  {"https://example.com/u", testUnsubKeys, "has no {token}"},
		"CRLF":            {"https://example.com/u/{token}\r\nBcc: x@evil.test", testUnsubKeys, "control"},
		"no keyring":      {"https://example.com/u/{token}", "", "no unsubscribe keyring"},
		"ledger's secret": {"https://example.com/u/{token}", "other:" + strings.TrimPrefix(testKeys, "k1:"), "shares a secret"},
	} {
		vars := map[string]string{"DIGEST_UNSUBSCRIBE_URL": tc.url, "DIGEST_UNSUBSCRIBE_KEYS": tc.keys}
		for k, v := range base {
			vars[k] = v
		}
		code, _, errOut := runMain(t, vars, "run", "--snapshot", "../../examples/snapshot.jsonl", "--week", "2026-W48")
		if code != ExitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %q", name, code, errOut, tc.want)
		}
	}
}

func TestKeyAddressPrintsTheAddressKey(t *testing.T) {
	t.Parallel()
	code, out, errOut := runMain(t, map[string]string{"DIGEST_HMAC_KEYS": testKeys}, "key", "--address", "Zoe@Example.com")
	kr, _ := digest.ParseKeyring(testKeys)
	if code != 0 || out != kr.AddressKey("zoe@example.com")+"\n" {
		t.Fatalf("exit %d, %q (%s)", code, out, errOut)
	}
}

func TestSummaryTableCountsSuppressed(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	printSummary(&Env{Stdout: &out}, &run.Config{}, run.Summary{Suppressed: 7}, "run finished")
	if !strings.Contains(out.String(), "7  suppressed (unsubscribed)") {
		t.Errorf("table lacks the suppressed row:\n%s", out.String())
	}
}
