package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/run"
)

// testEnv runs Main in-process with the given environment.
func runMain(t *testing.T, vars map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{
		Getenv: func(k string) string { return vars[k] },
		Stdin:  strings.NewReader(""),
		Stdout: &out,
		Stderr: &errb,
	}
	code = Main(context.Background(), args, env)
	return code, out.String(), errb.String()
}

const testKeys = "k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="

func TestWeekCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		tz   string
		want string
		code int
	}{
		{[]string{"week", "2026-12-31"}, "", "2026-W53 2026-12-28T00:00:00Z 2027-01-04T00:00:00Z\n", 0},
		{[]string{"week", "2027-01-01", "--tz", "Europe/Berlin"}, "", "2026-W53 2026-12-28T00:00:00+01:00 2027-01-04T00:00:00+01:00\n", 0},
		{[]string{"week", "2026-03-30"}, "America/New_York", "2026-W14 2026-03-30T00:00:00-04:00 2026-04-06T00:00:00-04:00\n", 0},
		{[]string{"week", "2024-12-30"}, "", "2025-W01 2024-12-30T00:00:00Z 2025-01-06T00:00:00Z\n", 0},
		{[]string{"week", "31/12/2026"}, "", "", 2},
		{[]string{"week", "2026-12-31", "extra"}, "", "", 2},
		{[]string{"week", "2026-12-31", "--tz", "Mars/Olympus"}, "", "", 2},
	} {
		code, out, errOut := runMain(t, map[string]string{"DIGEST_TZ": tc.tz}, tc.args...)
		if code != tc.code || out != tc.want {
			t.Errorf("digest %v: exit %d, %q (stderr %q); want exit %d, %q", tc.args, code, out, errOut, tc.code, tc.want)
		}
	}
}

func TestKeyCommandPrintsTheStoredKey(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"DIGEST_HMAC_KEYS": testKeys}
	code, out, errOut := runMain(t, vars, "key", "--customer", "customer_8421", "--week", "2026-W32", "--content-version", "v3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	kr, _ := digest.ParseKeyring(testKeys)
	w, _ := digest.ParseISOWeek("2026-W32")
	want := kr.Key(digest.Identity{Customer: "customer_8421", Week: w, Type: "weekly_activity", Version: "v3"})
	if strings.TrimSpace(out) != string(want) || !strings.HasPrefix(out, "k1:") {
		t.Fatalf("printed %q, want %q", out, want)
	}
	for _, bad := range [][]string{
		{"key", "--week", "2026-W32"},
		{"key", "--customer", "a|b", "--week", "2026-W32"},
		{"key", "--customer", "c", "--week", "2025-W53"},
	} {
		if code, _, _ := runMain(t, vars, bad...); code != ExitUsage {
			t.Errorf("digest %v: exit %d, want %d", bad, code, ExitUsage)
		}
	}
}

func TestKeyringConfigurationErrors(t *testing.T) {
	t.Parallel()
	secret := "c2VjcmV0LXRoYXQtaXMtdG9vLXNob3J0" // "secret-that-is-too-short"
	for _, tc := range []struct {
		name string
		vars map[string]string
		want string
	}{
		{"postgres without keys", map[string]string{"DIGEST_DATABASE_URL": "postgres://x@127.0.0.1:1/x"}, "no HMAC keyring"},
		{"short secret", map[string]string{"DIGEST_HMAC_KEYS": "k1:" + secret}, "at least 32"},
		{"both set", map[string]string{"DIGEST_HMAC_KEYS": testKeys, "DIGEST_HMAC_KEYS_FILE": "/x"}, "not both"},
		{"missing file", map[string]string{"DIGEST_HMAC_KEYS_FILE": "/nonexistent/keys"}, "no such file"},
	} {
		code, _, errOut := runMain(t, tc.vars, "key", "--customer", "c", "--week", "2026-W32")
		if code != ExitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, %q; want exit 2 mentioning %q", tc.name, code, errOut, tc.want)
		}
		if strings.Contains(errOut, secret) {
			t.Errorf("%s: the error printed the secret", tc.name)
		}
	}
}

func TestEveryCommandHasHelp(t *testing.T) {
	t.Parallel()
	code, out, _ := runMain(t, nil, "--help")
	if code != 0 || !strings.Contains(out, "Exit codes") || !strings.Contains(out, "DIGEST_DATABASE_URL") {
		t.Fatalf("digest --help: exit %d\n%s", code, out)
	}
	for _, c := range commands() {
		if !strings.Contains(out, "  "+c.name+" ") {
			t.Errorf("digest --help does not list %s", c.name)
		}
		code, out, errOut := runMain(t, nil, c.name, "--help")
		if code != 0 || !strings.Contains(out, "Usage") || errOut != "" {
			t.Errorf("digest %s --help: exit %d, stderr %q\n%s", c.name, code, errOut, out)
		}
		if n := strings.Count(out, "Flags:"); n != 1 {
			t.Errorf("digest %s --help prints its help %d times", c.name, n)
		}
		if c.name != "version" && !strings.Contains(out, "Example") {
			t.Errorf("digest %s --help has no examples", c.name)
		}
	}
	if code, _, errOut := runMain(t, nil, "frobnicate"); code != ExitUsage || !strings.Contains(errOut, "unknown command") {
		t.Errorf("unknown command: exit %d, %q", code, errOut)
	}
	if code, _, _ := runMain(t, nil); code != ExitUsage {
		t.Errorf("no command: exit %d, want 2", code)
	}
}

func TestParseShard(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, index string
		want      digest.Shard
		ok        bool
	}{
		{"", "", digest.Shard{}, true},
		{"0/4", "", digest.Shard{Index: 0, Count: 4}, true},
		{"3/4", "", digest.Shard{Index: 3, Count: 4}, true},
		{"/4", "2", digest.Shard{Index: 2, Count: 4}, true},
		{"/4", "", digest.Shard{}, false},
		{"/4", "4", digest.Shard{}, false},
		{"4/4", "", digest.Shard{}, false},
		{"-1/4", "", digest.Shard{}, false},
		{"1/0", "", digest.Shard{}, false},
		{"1", "", digest.Shard{}, false},
		{"a/b", "", digest.Shard{}, false},
	} {
		got, err := parseShard(tc.in, tc.index)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("parseShard(%q, JOB_COMPLETION_INDEX=%q) = %v, %v", tc.in, tc.index, got, err)
		}
	}
}

func TestParseAge(t *testing.T) {
	t.Parallel()
	for in, ok := range map[string]bool{"90d": true, "2160h": true, "1h30m": true, "": false, "0d": false, "-5h": false, "x": false, "d": false} {
		if _, err := parseAge(in); (err == nil) != ok {
			t.Errorf("parseAge(%q) = %v", in, err)
		}
	}
}

func TestRunExitCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		sum  run.Summary
		err  error
		want int
	}{
		{"complete", run.Summary{Sent: 3}, nil, ExitOK},
		{"failed permanently is settled", run.Summary{Failed: 1}, nil, ExitOK},
		{"pending", run.Summary{Pending: 2}, nil, ExitIncomplete},
		{"interrupted", run.Summary{Interrupted: true}, nil, ExitIncomplete},
		{"held", run.Summary{Held: 1, Pending: 1}, nil, ExitReview},
		{"quarantined", run.Summary{Quarantined: 1}, nil, ExitReview},
		{"invalid rows", run.Summary{Invalid: 1, Held: 1}, nil, ExitFailure},
		{"ledger down", run.Summary{}, errors.New("claim: connection refused"), ExitFailure},
		{"config", run.Summary{}, run.ErrConfig, ExitUsage},
		{"mail server unusable", run.Summary{Pending: 5}, fmt.Errorf("%w: starttls", run.ErrMailerUnusable), ExitUsage},
		{"mail server unreachable", run.Summary{Pending: 5}, fmt.Errorf("%w: refused", run.ErrMailerUnreachable), ExitIncomplete},
	} {
		var out bytes.Buffer
		if got := exitCode(&Env{Stderr: &out}, "run", runExit(tc.sum, tc.err)); got != tc.want {
			t.Errorf("%s: exit %d, want %d (%s)", tc.name, got, tc.want, out.String())
		}
	}
}

func TestRunRefusesWithoutASource(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	code, _, errOut := runMain(t, map[string]string{"DIGEST_LEDGER_PATH": dir + "/l.db", "DIGEST_OUTBOX_DIR": dir + "/o"}, "run", "--week", "2026-W48")
	if code != ExitUsage || !strings.Contains(errOut, "--snapshot") {
		t.Fatalf("exit %d, %q", code, errOut)
	}
	for _, args := range [][]string{
		{"run", "--week", "2026-W99", "--snapshot", "x"},
		{"run", "--mode", "loud", "--snapshot", "x"},
		{"run", "--cohort", "120", "--snapshot", "x"},
		{"run", "--cohort", "10", "--mode", "observe", "--snapshot", "x"},
		{"run", "--ambiguous", "maybe", "--snapshot", "x"},
		{"run", "--shard", "5/2", "--snapshot", "x"},
		{"run", "--snapshot", dir + "/missing.jsonl"},
	} {
		if code, _, errOut := runMain(t, map[string]string{"DIGEST_LEDGER_PATH": dir + "/l.db", "DIGEST_OUTBOX_DIR": dir + "/o"}, args...); code != ExitUsage {
			t.Errorf("digest %v: exit %d, want 2 (%s)", args, code, errOut)
		}
	}
}

// The settings given to schedule as flags hold for its runs, as if they
// were in the environment; the others stay the environment's.
func TestScheduleSettingsHoldForItsRuns(t *testing.T) {
	t.Parallel()
	env := &Env{Getenv: func(k string) string { return map[string]string{"DIGEST_TZ": "UTC", "DIGEST_TYPE": "monthly"}[k] }, Stdout: &bytes.Buffer{}}
	fs := newFlagSet(env, "schedule", scheduleHelp)
	st := register(fs, env, "schedule")
	fs.String("cron", "", "")
	pos, rest, err := parseRest(fs, []string{"--tz", "Europe/Berlin", "--cron", "0 6 * * MON", "--", "--tz", "Asia/Tokyo", "--week", "2026-W48"})
	if err != nil || len(pos) != 0 || strings.Join(rest, " ") != "--tz Asia/Tokyo --week 2026-W48" {
		t.Fatalf("parseRest: %v %q %q", err, pos, rest)
	}
	runEnv := withFlagSettings(env, st)
	if got := runEnv.Getenv("DIGEST_TZ"); got != "Europe/Berlin" {
		t.Errorf("a run sees DIGEST_TZ=%q; want schedule's --tz", got)
	}
	if got := runEnv.Getenv("DIGEST_TYPE"); got != "monthly" {
		t.Errorf("a run sees DIGEST_TYPE=%q; want the environment's", got)
	}
}

func TestClosestFlag(t *testing.T) {
	t.Parallel()
	fs := newFlagSet(&Env{Stdout: &bytes.Buffer{}}, "x", "")
	for _, f := range []string{"week", "deadline", "snapshot", "older-than", "from"} {
		fs.String(f, "", "")
	}
	for in, want := range map[string]string{"weak": "week", "deadlne": "deadline", "snapshto": "snapshot", "older-then": "older-than", "frob": "from", "verbose": "", "x": ""} {
		if got := closestFlag(fs, in); got != want {
			t.Errorf("closestFlag(%q) = %q, want %q", in, got, want)
		}
	}
}

// Issue 35: a run refused with exit 2 (here: another time zone than the
// one the week's first run pinned) logs its refusal only, not a "run
// finished" record of zeros before it.
func TestRefusedRunLogsItsRefusalOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	vars := map[string]string{"DIGEST_LEDGER_PATH": dir + "/l.db", "DIGEST_OUTBOX_DIR": dir + "/o", "DIGEST_TZ": "UTC", "DIGEST_LOG_LEVEL": "info"}
	args := []string{"run", "--week", "2026-W48", "--snapshot", "../../examples/snapshot.jsonl"}
	if code, _, errOut := runMain(t, vars, args...); code != ExitOK {
		t.Fatalf("first run: exit %d\n%s", code, errOut)
	}
	vars["DIGEST_TZ"] = "Europe/Berlin"
	code, _, errOut := runMain(t, vars, args...)
	if code != ExitUsage || !strings.Contains(errOut, "pinned to time zone UTC") {
		t.Fatalf("second run: exit %d, want 2 naming the pinned zone\n%s", code, errOut)
	}
	if strings.Contains(errOut, "run finished") {
		t.Errorf("a refused run logged a \"run finished\" record:\n%s", errOut)
	}
}
