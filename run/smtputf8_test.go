package run_test

import (
	"context"
	"errors"
	"iter"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/run"
)

// utf8Provider is a provider whose server offers SMTPUTF8 or not, or
// cannot be asked (err).
type utf8Provider struct {
	*provider
	offered bool
	err     error
	asked   int
}

func (p *utf8Provider) SMTPUTF8(context.Context) (bool, error) {
	p.asked++
	return p.offered, p.err
}

// jorgSource gives the first customer with activity a non-ASCII local part.
type jorgSource struct {
	inner digest.Source
	spec  digest.Spec
}

func (s jorgSource) Records(ctx context.Context, q digest.SourceQuery) iter.Seq2[digest.Record, error] {
	return func(yield func(digest.Record, error) bool) {
		done := false
		for rec, err := range s.inner.Records(ctx, q) {
			if d, berr := digest.Build(rec, s.spec); err == nil && berr == nil && !d.Empty() && !done {
				rec.Customer.Email = "jörg." + rec.Customer.Email
				done = true
			}
			if !yield(rec, err) {
				return
			}
		}
	}
}

// A non-ASCII local part goes only to a server that offers SMTPUTF8;
// otherwise, or when the server cannot say, it is a bad record before
// the claim: invalid (the run is not complete) or, lenient, skipped.
func TestNonASCIILocalPartOnlyWithSMTPUTF8(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		offered  bool
		err      error
		lenient  bool
		sent     int // beyond the others
		invalid  int
		complete bool
	}{
		{name: "offered", offered: true, sent: 1, complete: true},
		{name: "not offered", invalid: 1},
		{name: "not offered, lenient", lenient: true, complete: true},
		{name: "cannot tell", err: errors.New("dial: connection refused"), invalid: 1},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 20)
			p := &utf8Provider{provider: newProvider(), offered: c.offered, err: c.err}
			r := f.runner(p.provider, nil, func(cfg *run.Config) { cfg.Lenient = c.lenient })
			r.Mailer = p
			r.Source = jorgSource{inner: f.src, spec: r.Config.Spec}
			sum := f.run(r)
			if sum.Sent != f.want-1+c.sent || sum.Invalid != c.invalid || sum.Complete() != c.complete || sum.Failed != 0 {
				t.Fatalf("%+v; want sent %d, invalid %d, complete %v, none failed", sum, f.want-1+c.sent, c.invalid, c.complete)
			}
			if claimed := len(p.sends); claimed != f.want-1+c.sent {
				t.Fatalf("%d digests went to the mailer, want %d: the refused one must never be claimed", claimed, f.want-1+c.sent)
			}
			if p.asked == 0 {
				t.Fatal("the mailer was never asked about SMTPUTF8")
			}
		})
	}
}
