package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/sender"
	"github.com/weeklydigest/digest/weekstatus"
)

const previewHelp = `Usage: digest preview --customer ID [--week YYYY-Www] [--snapshot FILE.jsonl] [--html FILE] [--eml FILE]

Renders one customer's digest of a week as a run would and prints its text
part; --html writes the HTML part to a file, --eml the whole message (the
headers and parts the mailer sends, dated now). Nothing is claimed, sent or
recorded, and the week is not pinned: a pinned week is read at its pinned
cutoff (as_of), zone and key id, a week no run has pinned yet at now, in
DIGEST_TZ. A customer without activity in the week is rendered too (a run
skips them unless --send-empty); a customer the source does not have is an
error (exit 2).

Examples:
  digest preview --customer cust_0000042 --week 2026-W48
  digest preview --customer cust_0000042 --week 2026-W48 --html /tmp/d.html --eml /tmp/d.eml
  digest preview --customer cust_0001 --week 2026-W48 --snapshot examples/snapshot.jsonl
`

func cmdPreview(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "preview", previewHelp)
	st := register(fs, env, "preview")
	customer := fs.String("customer", "", "customer id (required)")
	week := fs.String("week", "", "ISO week YYYY-Www (default: the week before now in DIGEST_TZ)")
	snap := fs.String("snapshot", "", "JSON Lines snapshot file (default: the PostgreSQL source relations)")
	htmlFile := fs.String("html", "", "write the HTML part to this file")
	emlFile := fs.String("eml", "", "write the whole message (RFC 5322) to this file")
	if err := noArgs(fs, args); err != nil {
		return err
	}
	if *customer == "" {
		return usagef("--customer is required: the id of the customer whose digest to render")
	}
	ps, err := parsePreview(st, env, *week)
	if err != nil {
		return err
	}
	from, listUnsubscribe := ps.from, ps.listUnsubscribe
	log := newLogger(env, ps.level)
	wv, err := openWeekView(ctx, env, ps.view, *snap, log)
	if err != nil {
		return err
	}
	defer wv.close()
	var found *digest.Message
	var empty bool
	err = wv.each(ctx, []string{*customer}, func(d *digest.Digest, msg *digest.Message) bool {
		if d.Customer.ID != *customer {
			return true
		}
		found, empty = msg, d.Empty()
		return false
	})
	if err != nil {
		return err
	}
	if found == nil && wv.bad != nil {
		// Named customers' bad lines only: the customer's own record is
		// unreadable (in a snapshot out of order, its line says so).
		return fmt.Errorf("customer %q cannot be read from the source for %s: %w", *customer, wv.spec.Week, wv.bad)
	}
	if found == nil {
		return usagef("customer %q is not in the source for %s", *customer, wv.spec.Week)
	}
	if empty {
		fmt.Fprintf(env.Stderr, "digest preview: %s has no activity in %s: a run skips them unless --send-empty\n", *customer, wv.spec.Week)
	}
	fmt.Fprint(env.Stdout, found.Text)
	if *htmlFile != "" {
		if err := os.WriteFile(*htmlFile, []byte(found.HTML), 0o600); err != nil {
			return usagef("--html: %v", err)
		}
	}
	if *emlFile != "" {
		f, err := os.OpenFile(*emlFile, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return usagef("--eml: %v", err)
		}
		err = sender.WriteMessage(f, found, from, listUnsubscribe, env.now())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", *emlFile, err)
		}
	}
	return nil
}

// weekView reads a week's digests as a run would build them, without
// pinning the week or claiming anything: for previews and test sends.
type weekView struct {
	spec     digest.Spec
	asOf     time.Time
	keys     *digest.Keyring
	unsub    func(customerID string) string // nil: DIGEST_UNSUBSCRIBE_URL unset
	bad      error                          // the first record each skipped as unreadable
	source   digest.Source
	renderer *digest.Renderer
	close    func()
}

// weekViewSettings are the settings a week view reads, parsed.
type weekViewSettings struct {
	week         digest.ISOWeek // --week, else the week before now in zone
	zone         *time.Location
	typ, version string
	ledger       ledgerConfig
	keys         keyConfig
	unsubscribe  unsubscribeConfig
}

// previewSettings are the settings of "digest preview", parsed: the
// week view's and the headers of the --eml message.
type previewSettings struct {
	from            digest.Address
	listUnsubscribe string
	level           slog.Level
	view            weekViewSettings
}

func parsePreview(st *settings, env *Env, week string) (previewSettings, error) {
	var ps previewSettings
	var err error
	if ps.from, err = fromAddress(st); err != nil {
		return ps, err
	}
	ps.listUnsubscribe, ps.level = st.get("DIGEST_LIST_UNSUBSCRIBE"), st.logLevel()
	ps.view, err = parseWeekView(st, env, week)
	return ps, err
}

// parseWeekView reads the settings of a week view and the week it shows:
// week (--week), else the week before now in DIGEST_TZ.
func parseWeekView(st *settings, env *Env, week string) (weekViewSettings, error) {
	vs := weekViewSettings{typ: st.get("DIGEST_TYPE"), version: st.get("DIGEST_VERSION"),
		ledger: st.ledger(), keys: st.hmacKeys(), unsubscribe: st.unsubscribe()}
	var err error
	vs.week, vs.zone, err = weekAndZone(env, st, week)
	return vs, err
}

// openWeekView resolves the week the way a run does: at the pinned as_of,
// zone and key id when a run has pinned it, else at now in DIGEST_TZ.
func openWeekView(ctx context.Context, env *Env, vs weekViewSettings, snap string, log *slog.Logger) (*weekView, error) {
	w, loc := vs.week, vs.zone
	if snap == "" && vs.ledger.DatabaseURL == "" {
		return nil, usagef("no source: pass --snapshot FILE.jsonl, or set DIGEST_DATABASE_URL to read digest_customers and digest_activity")
	}
	keys, err := loadKeyring(vs.keys, vs.ledger, log)
	if err != nil {
		return nil, err
	}
	unsub, err := loadUnsubscribe(vs.unsubscribe, keys)
	if err != nil {
		return nil, err
	}
	renderer, err := digest.NewRenderer()
	if err != nil {
		return nil, err
	}
	wv := &weekView{
		spec: digest.Spec{Week: w, Location: loc, Type: vs.typ, Version: vs.version},
		asOf: env.now(), keys: keys, unsub: unsub, renderer: renderer, close: func() {},
	}
	var store *ledgerDB
	if vs.ledger.DatabaseURL != "" || fileExists(vs.ledger.LedgerPath) {
		if store, err = openLedger(ctx, env, vs.ledger, log); err != nil {
			return nil, err
		}
		if err := wv.pinned(ctx, store); err != nil {
			store.Close()
			return nil, err
		}
	}
	source, closeSource, err := openSource(ctx, vs.ledger, snap, store, log)
	if err != nil {
		if store != nil {
			store.Close()
		}
		return nil, err
	}
	wv.source = source
	wv.close = func() {
		closeSource()
		if store != nil {
			store.Close()
		}
	}
	return wv, nil
}

// pinned adopts the week's pin, if a run has made one.
func (wv *weekView) pinned(ctx context.Context, store ledger.Store) error {
	spec, wp, ok, err := weekstatus.PinnedSpec(ctx, store, wv.spec)
	if err != nil || !ok {
		return err
	}
	wv.spec, wv.asOf = spec, wp.AsOf
	if kr, ok := wv.keys.Pinned(wp.KeyID); ok {
		wv.keys = kr
	}
	return nil
}

// each builds and renders the week's digests in customer id order, of
// the customers listed (nil: all), and calls fn with each until it returns
// false. A record the source cannot read is skipped. The PostgreSQL source
// finds listed customers by primary key, so a preview reads one customer,
// not the week up to it.
func (wv *weekView) each(ctx context.Context, customers []string, fn func(*digest.Digest, *digest.Message) bool) error {
	q := digest.SourceQuery{Week: wv.spec.Week, Location: wv.spec.Location, AsOf: wv.asOf, Customers: customers}
	for rec, err := range wv.source.Records(ctx, q) {
		var bad *digest.BadRecordError
		if errors.As(err, &bad) {
			if wv.bad == nil {
				wv.bad = err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("read source: %w", err)
		}
		if !q.Wants(rec.Customer.ID) {
			continue // a source that does not filter customers itself
		}
		d, err := digest.Build(rec, wv.spec)
		if err != nil {
			continue
		}
		unsub := ""
		if wv.unsub != nil {
			unsub = wv.unsub(d.Customer.ID)
		}
		msg, err := wv.renderer.Message(&d, wv.keys.Key(d.Identity), unsub)
		if err != nil {
			return err
		}
		if !fn(&d, msg) {
			return nil
		}
	}
	return ctx.Err()
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}
