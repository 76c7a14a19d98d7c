package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Every command declares its settings, every declared name is a setting,
// and every setting is some command's.
func TestEveryCommandDeclaresItsSettings(t *testing.T) {
	t.Parallel()
	used := map[string]bool{}
	for _, c := range commands() {
		declared, ok := commandSettings[c.name]
		if !ok {
			t.Errorf("digest %s declares no settings in commandSettings", c.name)
		}
		for _, env := range declared {
			if !slices.ContainsFunc(settingsTable, func(s setting) bool { return s.env == env }) {
				t.Errorf("digest %s declares %s, which is not a setting", c.name, env)
			}
			used[env] = true
		}
	}
	if len(commandSettings) != len(commands()) {
		t.Errorf("commandSettings has %d commands, commands() %d", len(commandSettings), len(commands()))
	}
	for _, s := range settingsTable {
		if !used[s.env] {
			t.Errorf("%s is no command's setting", s.env)
		}
	}
}

// Every variable has a flag of the same name (DIGEST_SMTP_URL: --smtp-url),
// or is a secret whose help says it is env only: a command line shows in
// ps and in shell history.
func TestEverySettingHasItsFlagOrSaysWhyNot(t *testing.T) {
	t.Parallel()
	for _, s := range settingsTable {
		same := strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(s.env, "DIGEST_")), "_", "-")
		switch {
		case s.flag == "" && !strings.Contains(s.help, "env only: a secret"):
			t.Errorf("%s has no flag and its help does not say why", s.env)
		case s.flag != "" && s.flag != same:
			t.Errorf("%s has the flag --%s; want --%s", s.env, s.flag, same)
		}
	}
}

// settingFlags returns the flags of settings (deprecated names included)
// that "digest NAME --help" lists: those whose text ends in [$DIGEST_...].
// (verify's own --rate and --concurrency, of its look-ups, are no
// settings.)
func settingFlags(t *testing.T, name string) []string {
	t.Helper()
	code, out, errOut := runMain(t, nil, name, "--help")
	if code != ExitOK {
		t.Fatalf("digest %s --help: exit %d: %s", name, code, errOut)
	}
	var got []string
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+).*\n\s+[^\n]*\[\$DIGEST_[A-Z0-9_]+\]`).FindAllStringSubmatch(out, -1) {
		got = append(got, m[1])
	}
	slices.Sort(got)
	return got
}

// Each command's --help lists exactly the flags of the settings it
// declares (and so reads: TestCommandSettingsAreWhatParseReads), no other.
func TestCommandHelpListsItsOwnSettings(t *testing.T) {
	t.Parallel()
	for _, c := range commands() {
		var want []string
		for _, env := range commandSettings[c.name] {
			f := row(env).flag
			if f == "" {
				continue
			}
			want = append(want, f)
			for old, name := range deprecatedFlags {
				if name == f {
					want = append(want, old)
				}
			}
		}
		slices.Sort(want)
		if got := settingFlags(t, c.name); !slices.Equal(got, want) {
			t.Errorf("digest %s --help lists the settings flags\n  %v\nwant\n  %v", c.name, got, want)
		}
	}
}

// fullSettings is an environment that sets every setting to a valid value
// that takes every branch of the parse steps (an SMTP relay, an events
// look-up, a Pushgateway with a PostgreSQL source, an unsubscribe URL).
func fullSettings(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	return map[string]string{
		"DIGEST_DATABASE_URL":     "postgres://digest@127.0.0.1:5432/app",
		"DIGEST_LEDGER_PATH":      filepath.Join(dir, "digest.db"),
		"DIGEST_SMTP_URL":         "smtp://127.0.0.1:2525?tls=none",
		"DIGEST_OUTBOX_DIR":       dir,
		"DIGEST_LOOKUP_URL":       "events:postmark",
		"DIGEST_HMAC_KEYS":        testKeys,
		"DIGEST_UNSUBSCRIBE_URL":  "https://example.com/u/{token}",
		"DIGEST_UNSUBSCRIBE_KEYS": "u1:AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=",
		"DIGEST_PUSHGATEWAY_URL":  "http://127.0.0.1:9091",
		"DIGEST_TZ":               "Europe/Berlin",
	}
}

// parseSteps runs each command's parse step, as the command does before
// it opens anything.
var parseSteps = map[string]func(st *settings, env *Env) error{
	// A run reads its mailer's settings (readMailer) after checking its
	// flags.
	"run": func(st *settings, env *Env) error {
		if _, err := parseRun(st, env, "", "enforce", "", -1, "hold"); err != nil {
			return err
		}
		_, err := readMailer(env, st, 1, slog.New(slog.DiscardHandler))
		return err
	},
	"migrate": func(st *settings, _ *Env) error { parseMigrate(st); return nil },
	"status": func(st *settings, env *Env) error {
		_, err := parseStatus(st, env, "", "", "")
		return err
	},
	"verify": func(st *settings, env *Env) error {
		_, err := parseVerify(st, env, "")
		return err
	},
	"review": func(st *settings, _ *Env) error {
		rv := parseReview(st)
		if rv.push.err != nil {
			return rv.push.err
		}
		return rv.lookupErr
	},
	"repin":       func(st *settings, _ *Env) error { _, err := parseRepin(st); return err },
	"suppression": func(st *settings, _ *Env) error { parseSuppression(st); return nil },
	"events":      func(st *settings, _ *Env) error { _, _, _, err := parseEvents(st); return err },
	"prune":       func(st *settings, _ *Env) error { _, err := parsePrune(st, "90d"); return err },
	"schedule":    func(st *settings, env *Env) error { _, err := parseSchedule(st, env); return err },
	"serve":       func(st *settings, _ *Env) error { _, err := parseServe(st); return err },
	"preview":     func(st *settings, env *Env) error { _, err := parsePreview(st, env, ""); return err },
	"send-test": func(st *settings, env *Env) error {
		_, _, _, err := parseSendTest(st, env, "")
		return err
	},
	"seed":              func(st *settings, _ *Env) error { parseSeed(st); return nil },
	"week":              func(st *settings, _ *Env) error { _, err := parseWeek(st); return err },
	"key":               func(st *settings, _ *Env) error { parseKey(st); return nil },
	"unsubscribe-token": func(st *settings, _ *Env) error { parseUnsubscribeToken(st); return nil },
	"version":           func(*settings, *Env) error { return nil },
}

// Each command's parse step reads exactly the settings the command
// declares: a setting read but not declared panics in settings.get (and
// would be missing from --help); one declared but not read is a flag the
// command ignores.
func TestCommandSettingsAreWhatParseReads(t *testing.T) {
	t.Parallel()
	vars := fullSettings(t)
	for _, c := range commands() {
		parseStep, ok := parseSteps[c.name]
		if !ok {
			t.Errorf("digest %s: no parse step in parseSteps", c.name)
			continue
		}
		env := &Env{Getenv: func(k string) string { return vars[k] }, Stdout: io.Discard, Stderr: io.Discard}
		fs := newFlagSet(env, c.name, "")
		st := register(fs, env, c.name)
		if err := fs.Parse(nil); err != nil {
			t.Fatal(err)
		}
		if err := parseStep(st, env); err != nil {
			t.Errorf("digest %s: parse step: %v", c.name, err)
		}
		got := slices.Sorted(maps.Keys(st.read))
		want := slices.Sorted(slices.Values(commandSettings[c.name]))
		if !slices.Equal(got, want) {
			t.Errorf("digest %s: the parse step read\n  %v\nwant (declared)\n  %v", c.name, got, want)
		}
	}
}

// A parse step that reads a setting its command does not declare panics:
// the declaration, and so --help, cannot fall behind the code.
func TestUndeclaredSettingReadPanics(t *testing.T) {
	t.Parallel()
	env := &Env{Getenv: func(string) string { return "" }}
	fs := flag.NewFlagSet("week", flag.ContinueOnError)
	st := register(fs, env, "week")
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Error("digest week read DIGEST_SMTP_URL without a panic")
		}
	}()
	st.get("DIGEST_SMTP_URL")
}

// A command's flags are parsed before its parse step reads them: a read
// before would ignore the flag (migrate --ledger-path).
func TestSettingReadBeforeFlagsPanics(t *testing.T) {
	t.Parallel()
	env := &Env{Getenv: func(string) string { return "" }}
	st := register(flag.NewFlagSet("migrate", flag.ContinueOnError), env, "migrate")
	defer func() {
		if recover() == nil {
			t.Error("digest migrate read DIGEST_LEDGER_PATH before its flags without a panic")
		}
	}()
	st.get("DIGEST_LEDGER_PATH")
}

// A setting's flag wins over its variable in what the parse step reads.
func TestSettingFlagWinsOverEnvironment(t *testing.T) {
	t.Parallel()
	env := &Env{Getenv: func(k string) string { return map[string]string{"DIGEST_LEDGER_PATH": "env.db"}[k] }}
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	st := register(fs, env, "migrate")
	if err := fs.Parse([]string{"--ledger-path", "flag.db"}); err != nil {
		t.Fatal(err)
	}
	if lc, _ := parseMigrate(st); lc.LedgerPath != "flag.db" {
		t.Errorf("ledger path %q; want the flag's flag.db", lc.LedgerPath)
	}
}

// --version sets DIGEST_VERSION, as its name says; --content-version, its
// old name, still does.
func TestVersionFlagAndItsDeprecatedName(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"DIGEST_HMAC_KEYS": testKeys}
	args := []string{"key", "--customer", "customer_8421", "--week", "2026-W32"}
	_, def, _ := runMain(t, vars, args...)
	code, byNew, errOut := runMain(t, vars, append(args, "--version", "v3")...)
	if code != ExitOK {
		t.Fatalf("--version v3: exit %d: %s", code, errOut)
	}
	_, byOld, _ := runMain(t, vars, append(args, "--content-version", "v3")...)
	vars["DIGEST_VERSION"] = "v3"
	_, byEnv, _ := runMain(t, vars, args...)
	if byNew != byEnv || byOld != byEnv || byNew == def {
		t.Errorf("key of v3: --version %q, --content-version %q, DIGEST_VERSION %q (default v1: %q)", byNew, byOld, byEnv, def)
	}
	_, help, _ := runMain(t, nil, "key", "--help")
	if !strings.Contains(help, "deprecated: the old name of --version") {
		t.Errorf("key --help does not call --content-version deprecated:\n%s", help)
	}
}

// unsubscribe-token lists only the keyrings and template it reads.
func TestUnsubscribeTokenHelpListsNoSendingFlags(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	Main(context.Background(), []string{"unsubscribe-token", "--help"}, &Env{Getenv: func(string) string { return "" }, Stdout: &out, Stderr: io.Discard})
	for _, f := range []string{"-rate", "-smtp-url", "-from", "-log-level", "-lease"} {
		if strings.Contains(out.String(), "\n  "+f+" ") {
			t.Errorf("unsubscribe-token --help lists %s, which it ignores", f)
		}
	}
}

// The parse steps refuse a bad --week and a bad DIGEST_TZ in each
// command's own order: status, preview and send-test name the week first
// (they read the zone only for a default week), run the zone.
func TestBadWeekAndBadZoneInTheirOrder(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"DIGEST_TZ": "Local", "DIGEST_HMAC_KEYS": testKeys}
	for _, tc := range []struct {
		args  []string
		names string
	}{
		{[]string{"status", "--week", "2026-W99", "--snapshot", "x.jsonl"}, "--week"},
		{[]string{"preview", "--customer", "c1", "--week", "2026-W99", "--snapshot", "x.jsonl"}, "--week"},
		{[]string{"send-test", "--to", "qa@example.com", "--week", "2026-W99", "--snapshot", "x.jsonl"}, "--week"},
		{[]string{"run", "--week", "2026-W99", "--snapshot", "x.jsonl"}, "DIGEST_TZ"},
	} {
		code, _, errOut := runMain(t, vars, tc.args...)
		var rec struct{ Reason string }
		if err := json.Unmarshal([]byte(errOut), &rec); err != nil {
			t.Fatalf("digest %v: %v: %s", tc.args, err, errOut)
		}
		if code != ExitUsage || !strings.HasPrefix(rec.Reason, tc.names) {
			t.Errorf("digest %v: exit %d, %q; want 2 naming %s", tc.args, code, rec.Reason, tc.names)
		}
	}
}
