package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/weekstatus"
)

// verifyVersions is what verify adds when the week's sent receipts are of
// more than one content version of DIGEST_TYPE: each customer's version
// is a message of its own, so receipts are not customers.
type verifyVersions struct {
	// SentByVersion counts the week's sent or in-flight receipts of the
	// type by version ("" unknown: made before receipts stored it).
	SentByVersion map[string]int64 `json:"sent_by_version,omitempty"`
	// CustomersSent and CustomersMoreThanOneVersion count customers, read
	// from the source and matched by key under every version (status's
	// count); nil when no source could be read (CustomersNotCounted says
	// why).
	CustomersSent               *int64 `json:"customers_sent,omitempty"`
	CustomersMoreThanOneVersion *int64 `json:"customers_more_than_one_version,omitempty"`
	CustomersNotCounted         string `json:"customers_not_counted,omitempty"`
}

// countVersions fills verifyVersions for the week when it was sent under
// more than one version of the type, and returns nil otherwise.
func countVersions(ctx context.Context, env *Env, st *settings, vs verifySettings, store *ledgerDB, snap string, log *slog.Logger) (*verifyVersions, error) {
	typ, version := vs.typ, vs.version
	by, err := store.SentByVersion(ctx, vs.week, typ)
	if err != nil {
		return nil, err
	}
	if len(by) < 2 {
		return nil, nil
	}
	out := &verifyVersions{SentByVersion: by}
	if snap == "" && vs.ledger.DatabaseURL == "" {
		out.CustomersNotCounted = "no source: pass --snapshot FILE.jsonl (the one the runs read) to count customers"
		return out, nil
	}
	keys, err := loadKeyring(vs.keys, vs.ledger, log)
	if err != nil {
		return nil, err
	}
	source, closeSource, err := openSource(ctx, vs.ledger, snap, store, log)
	if err != nil {
		return nil, err
	}
	defer closeSource()
	loc, err := st.location()
	if err != nil {
		return nil, err
	}
	q := weekstatus.Query{Spec: digest.Spec{Week: vs.week, Location: loc, Type: typ, Version: version}, Settle: vs.settle, Keys: keys, Now: env.now()}
	ws, _, _, err := weekstatus.Compute(ctx, store, source, q)
	if err != nil {
		return nil, fmt.Errorf("count the week's customers: %w", err)
	}
	sent := ws.Customers[weekstatus.Sent] // under DIGEST_VERSION
	out.CustomersSent, out.CustomersMoreThanOneVersion = &sent, &ws.CustomersMoreThanOneVersion
	return out, nil
}

// print adds the versions to verify's table.
func (v *verifyVersions) print(out io.Writer, typ string) {
	if v == nil {
		return
	}
	var parts []string
	for _, ver := range slices.Sorted(maps.Keys(v.SentByVersion)) {
		name := ver
		if ver == "" {
			name = "unknown version"
		}
		parts = append(parts, fmt.Sprintf("%s %d", name, v.SentByVersion[ver]))
	}
	fmt.Fprintf(out, "versions: the week's sent receipts are of %d content versions of %s (%s): one message per customer and version\n",
		len(v.SentByVersion), typ, strings.Join(parts, ", "))
	if v.CustomersSent == nil {
		fmt.Fprintf(out, "customers: not counted (%s)\n", v.CustomersNotCounted)
		return
	}
	fmt.Fprintf(out, "customers: %d sent under DIGEST_VERSION, %d of them under more than one version (digest status counts each outcome)\n",
		*v.CustomersSent, *v.CustomersMoreThanOneVersion)
}
