package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"text/tabwriter"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/metrics"
	"github.com/weeklydigest/digest/internal/redact"
	"github.com/weeklydigest/digest/sender/mailpit"
	"github.com/weeklydigest/digest/sender/outbox"
	"github.com/weeklydigest/digest/sender/smtp"
	"github.com/weeklydigest/digest/verify"
)

const verifyHelp = `Usage: digest verify [--week YYYY-Www] [--sample N] [--rate R] [--concurrency N] [--json]

The rollout gate: "one digest, one message accepted by the provider, one
sent receipt", checked for a week after its run. For every sent receipt of
the week (streamed from the ledger a page at a time) it asks the provider
how many messages carry the receipt's key (X-Digest-Key; Mailpit's tag,
Postmark's digest-key metadata, the outbox's file name):

  found once              agrees
  not found               a receipt without a message (deleted, or never accepted)
  found more than once    a digest sent twice

Where the provider can list its messages (Mailpit, the file outbox; not
Postmark) it also reports messages whose key is a receipt of the week that
is not sent (failed, retryable, held, quarantined, claimed): mail that went
out behind the ledger's back, or that a run still holds. Keys are HMACs, so
a message whose key no receipt of the week has cannot be told from another
week's and is not reported. Every sent receipt of the ISO week is checked,
whatever its DIGEST_TYPE and DIGEST_VERSION.

The provider is DIGEST_LOOKUP_URL (mailpit+http://..., postmark+https://...),
else the file outbox DIGEST_OUTBOX_DIR; an SMTP relay alone cannot be asked.
Look-ups are paced by --rate (a token bucket, like the job's sends) and run
--concurrency at a time; a temporary failure is asked again twice. Against
Mailpit the counts come from one listing of its messages (1,000 a call),
not a search per key. For a
large week, --sample N checks a uniform random sample of N sent receipts
(the listing for unrecorded messages still reads everything). Output names
keys (HMACs) only, never an address. With DIGEST_PUSHGATEWAY_URL it pushes
digest_verify_timestamp_seconds, digest_verify_checked and
digest_verify_mismatches to the group job="digest_verify", week=W.

Run it after each week's run, and before widening a rollout (runbook:
docs/operations.md).

--json prints one object: week, provider, sent, sample, checked,
found_once, not_found (keys), duplicated ({key, count}), unrecorded_checked,
listed, unrecorded ({key, state}), errors, error_examples ({key, error}),
provider_calls, duration (seconds) and exit_code.

Each check is of a receipt: one message per receipt. When the week's sent
receipts are of more than one DIGEST_VERSION of DIGEST_TYPE (a resend as a
new version, run --resend-as-new-version), a receipt is not a customer:
verify also prints them by version and counts customers as status does
(the source read, each customer matched by key under every version: sent
under DIGEST_VERSION, and how many of them under more than one version).
The source is the PostgreSQL relations, or --snapshot with the embedded
ledger; the keyring is needed. --json adds sent_by_version,
customers_sent and customers_more_than_one_version (or
customers_not_counted, why not).

Exit codes: 0 everything checked agrees, 1 some key disagrees (or the
ledger could not be read), 3 the provider could not be asked about some
keys (and none disagrees) or the week has no sent receipt, 2 usage.

Examples:
  digest verify --week 2026-W48
  digest verify --week 2026-W48 --sample 2000 --json
  DIGEST_LOOKUP_URL=mailpit+http://mailpit:8025 digest verify --week 2026-W48 --rate 200
  digest verify --week 2026-W48 --outbox-dir ./outbox --ledger-path ./digest.db
`

// Defaults of verify's own flags.
const (
	verifyRate        = 50
	verifyConcurrency = 4
	// verifyListKeys bounds the keys of each kind the table names; --json
	// lists them all.
	verifyListKeys = 50
)

// verifyJSON is the report with its exit code, for --json.
type verifyJSON struct {
	*verify.Report
	*verifyVersions
	ExitCode int `json:"exit_code"`
}

func cmdVerify(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "verify", verifyHelp)
	st := register(fs, env, "verify")
	week := fs.String("week", "", "ISO week YYYY-Www (default: the week before now in DIGEST_TZ)")
	sample := fs.Int("sample", 0, "check a uniform random sample of N sent receipts instead of all")
	rate := fs.Float64("rate", verifyRate, "provider look-ups per second, at most (0: unlimited)")
	concurrency := fs.Int("concurrency", verifyConcurrency, "look-ups at once")
	asJSON := fs.Bool("json", false, "print one JSON object (for scripts) instead of a table")
	snap := fs.String("snapshot", "", "JSON Lines snapshot file the runs read, to count customers when the week was sent under more than one version (default: the PostgreSQL source relations)")
	if err := noArgs(fs, args); err != nil {
		return err
	}
	vs, err := parseVerify(st, env, *week)
	if err != nil {
		return err
	}
	switch {
	case *sample < 0:
		return usagef("--sample %d: want 0 (every sent receipt) or more", *sample)
	case *concurrency < 1 || *concurrency > 256:
		return usagef("--concurrency %d: want 1 to 256", *concurrency)
	}
	limiter, err := smtp.NewLimiter(*rate, *concurrency)
	if err != nil {
		return usagef("--rate: %v", err)
	}
	cfg := verify.Config{Week: vs.week, Sample: *sample, Concurrency: *concurrency, Limiter: limiter, Now: env.Now}
	if err := verifyProvider(vs, &cfg); err != nil {
		return err
	}
	log := newLogger(env, vs.level)
	store, err := openLedger(ctx, env, vs.ledger, log)
	if err != nil {
		return err
	}
	defer store.Close()
	cfg.Ledger = store
	v, err := verify.New(cfg)
	if err != nil {
		return usagef("%v", err)
	}
	stop := startVerifyProgress(env, v)
	rep, err := v.Run(ctx)
	stop()
	if err != nil {
		return err
	}
	versions, err := countVersions(ctx, env, st, vs, store, *snap, log)
	if err != nil {
		return err
	}
	code := verifyExitCode(rep)
	pushVerify(ctx, env, vs.pushgatewayURL, log, rep)
	logVerify(log, rep, code)
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(verifyJSON{rep, versions, code}); err != nil {
			return err
		}
	} else {
		printVerify(env.Stdout, rep, code)
		versions.print(env.Stdout, vs.typ)
	}
	if code != ExitOK {
		return &exitError{code: code}
	}
	return nil
}

// verifySettings are the settings of "digest verify", parsed, with the
// week --week names.
type verifySettings struct {
	week           digest.ISOWeek
	lookup         digest.Lookup // nil: none set
	lookupURL      string        // DIGEST_LOOKUP_URL
	smtpURL        string        // DIGEST_SMTP_URL: set, an SMTP relay that cannot be asked
	outboxDir      string
	outboxNamed    bool // DIGEST_OUTBOX_DIR set on purpose
	level          slog.Level
	ledger         ledgerConfig
	pushgatewayURL string
	// What counts customers when the week was sent under more than one
	// version (countVersions).
	typ, version string
	keys         keyConfig
	settle       time.Duration
}

// parseVerify reads verify's settings; the zone only when no --week names
// the week.
func parseVerify(st *settings, env *Env, week string) (verifySettings, error) {
	vs := verifySettings{lookupURL: st.get("DIGEST_LOOKUP_URL"), smtpURL: st.get("DIGEST_SMTP_URL"),
		outboxDir: st.get("DIGEST_OUTBOX_DIR"), outboxNamed: st.explicit("DIGEST_OUTBOX_DIR"),
		level: st.logLevel(), ledger: st.ledger(), pushgatewayURL: st.get("DIGEST_PUSHGATEWAY_URL"),
		typ: st.get("DIGEST_TYPE"), version: st.get("DIGEST_VERSION"), keys: st.hmacKeys()}
	var err error
	if vs.settle, err = st.duration("DIGEST_SETTLE"); err != nil {
		return vs, err
	}
	var loc *time.Location
	if week == "" {
		if loc, err = st.location(); err != nil {
			return vs, err
		}
	}
	w, err := weekOrPrevious(env, loc, week)
	if err != nil {
		return vs, err
	}
	vs.week = w
	if vs.lookup, err = openLookup(st); err != nil {
		return vs, err
	}
	return vs, nil
}

// verifyProvider sets cfg's provider from the settings: the look-up URL,
// else the file outbox (named on purpose with a PostgreSQL ledger).
func verifyProvider(vs verifySettings, cfg *verify.Config) error {
	if l := vs.lookup; l != nil {
		counter, ok := l.(verify.Counter)
		if !ok {
			return usagef("DIGEST_LOOKUP_URL: this look-up cannot count messages")
		}
		cfg.Provider, cfg.Name = counter, redact.URL(vs.lookupURL)
		cfg.Lister, _ = l.(verify.Lister)
		// Each Mailpit search reply lists every tag of the mailbox: a
		// search per key would cost the square of the week.
		_, cfg.CountByListing = l.(*mailpit.Lookup)
		return nil
	}
	switch {
	case vs.smtpURL != "":
		return usagef("no provider to ask: DIGEST_SMTP_URL is set and an SMTP relay cannot be asked what it accepted; set DIGEST_LOOKUP_URL (mailpit+http://... or postmark+https://...)")
	case vs.ledger.DatabaseURL != "" && !vs.outboxNamed:
		return usagef("no provider to ask: set DIGEST_LOOKUP_URL, or name the outbox directory the run wrote (DIGEST_OUTBOX_DIR or --outbox-dir)")
	}
	if fi, err := os.Stat(vs.outboxDir); err != nil || !fi.IsDir() {
		return usagef("DIGEST_OUTBOX_DIR=%q: not a directory; name the outbox the run wrote", vs.outboxDir)
	}
	ob, err := outbox.New(outbox.Config{Dir: vs.outboxDir, From: digest.Address{Email: "verify@localhost"}})
	if err != nil {
		return usagef("%v", err)
	}
	// Local files: the pace of an API is not theirs.
	cfg.Provider, cfg.Lister, cfg.Name, cfg.Limiter = ob, ob, "outbox "+vs.outboxDir, nil
	return nil
}

// verifyExitCode: 1 when a key disagrees, else 3 when some could not be
// asked about or the week has no sent receipt (a gate that passes having
// checked nothing would pass a wrong ledger or week), else 0.
func verifyExitCode(rep *verify.Report) int {
	switch {
	case rep.Mismatches() > 0:
		return ExitFailure
	case rep.Errors > 0 || rep.Sent == 0:
		return ExitIncomplete
	}
	return ExitOK
}

// pushVerify pushes the verification's metrics when DIGEST_PUSHGATEWAY_URL
// is set; a failed push is logged and changes no exit code.
func pushVerify(ctx context.Context, env *Env, url string, log *slog.Logger, rep *verify.Report) {
	if url == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pushTimeout)
	defer cancel()
	m := metrics.Verification{Week: rep.Week, Checked: rep.Checked, Mismatches: rep.Mismatches(), Finished: env.now()}
	if err := metrics.PushVerify(ctx, url, nil, m); err != nil {
		log.Error("metrics: push failed", "err", err)
	}
}

// logVerify logs one record of the outcome, with counts (no key lists).
func logVerify(log *slog.Logger, rep *verify.Report, code int) {
	level, msg := slog.LevelInfo, "verify: every checked digest agrees"
	switch code {
	case ExitFailure:
		level, msg = slog.LevelError, "verify: keys disagree with the provider"
	case ExitIncomplete:
		level, msg = slog.LevelWarn, "verify: the provider could not be asked about some keys, or nothing was sent"
	}
	log.Log(context.Background(), level, msg, "week", rep.Week, "provider", rep.Provider,
		"checked", rep.Checked, "found_once", rep.FoundOnce, "not_found", len(rep.NotFound),
		"duplicated", len(rep.Duplicated), "unrecorded", len(rep.Unrecorded), "errors", rep.Errors,
		"provider_calls", rep.ProviderCalls, "duration", time.Duration(rep.Duration), "exit_code", code)
}

// printVerify writes the report as a table, then the failing keys.
func printVerify(out io.Writer, rep *verify.Report, code int) {
	fmt.Fprintf(out, "verify %s against %s\n", rep.Week, rep.Provider)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(name string, v any) { fmt.Fprintf(w, "%v\t  %s\n", v, name) }
	row("sent receipts", rep.Sent)
	if rep.Sample > 0 {
		row("checked (a random sample)", rep.Checked)
	} else {
		row("checked", rep.Checked)
	}
	row("found once", rep.FoundOnce)
	row("not found", len(rep.NotFound))
	row("found more than once", len(rep.Duplicated))
	if rep.UnrecordedChecked {
		row("unrecorded (a message, no sent receipt)", len(rep.Unrecorded))
	} else {
		row("unrecorded (a message, no sent receipt)", "not checked: the provider cannot list")
	}
	row("errors (provider not asked)", rep.Errors)
	row("provider calls", rep.ProviderCalls)
	row("duration", time.Duration(rep.Duration).Round(time.Millisecond))
	w.Flush()
	names := func(what string, n int, name func(i int) string) {
		for i := range min(n, verifyListKeys) {
			fmt.Fprintf(out, "%s: %s\n", what, name(i))
		}
		if n > verifyListKeys {
			fmt.Fprintf(out, "%s: ... and %d more (--json lists them all)\n", what, n-verifyListKeys)
		}
	}
	names("not found", len(rep.NotFound), func(i int) string { return string(rep.NotFound[i]) })
	names("duplicated", len(rep.Duplicated), func(i int) string {
		return fmt.Sprintf("%s (%d messages)", rep.Duplicated[i].Key, rep.Duplicated[i].Count)
	})
	names("unrecorded", len(rep.Unrecorded), func(i int) string {
		return fmt.Sprintf("%s (receipt %s)", rep.Unrecorded[i].Key, rep.Unrecorded[i].State)
	})
	names("error", len(rep.ErrorExamples), func(i int) string {
		return fmt.Sprintf("%s: %s", rep.ErrorExamples[i].Key, rep.ErrorExamples[i].Error)
	})
	switch {
	case code == ExitOK:
		fmt.Fprintln(out, "verdict: agrees")
	case code == ExitFailure:
		fmt.Fprintln(out, `verdict: DISAGREES ("digest review show KEY" for a key's history; runbook: "Verifying a week")`)
	case rep.Sent == 0 && rep.Errors == 0:
		fmt.Fprintf(out, "verdict: nothing to verify: no sent receipt of %s in this ledger (the right ledger and week?)\n", rep.Week)
	default:
		fmt.Fprintln(out, "verdict: incomplete, the provider could not be asked about some keys; run again")
	}
}

// startVerifyProgress draws a progress line on stderr when it is a
// terminal, and returns the function that stops it.
func startVerifyProgress(env *Env, v *verify.Verifier) func() {
	return progressLine(env, func(el float64) string {
		p := v.Progress()
		return fmt.Sprintf("%d of %d checked · %d listed · %d mismatches · %d errors · %.0f/s",
			p.Checked, p.Total, p.Listed, p.Mismatches, p.Errors, float64(p.Checked)/max(el, 0.001))
	})
}
