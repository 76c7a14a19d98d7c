// Tracing: the spans a run reports through Config.Tracer. Package run
// knows no tracing library; cmd/digest adapts OpenTelemetry to Tracer.

package run

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/weeklydigest/digest/digest"
)

// Tracer starts the spans of a run (Config.Tracer): one for the run, one
// per pass, claim batch, start chunk and finish batch (a ledger call
// each), and one per key for a look-up of a maybe-sent claim and for a
// failed send. Span attributes carry the week, counts, outcomes, error
// classes and keys (the HMAC hex of digest.Key, which reveals nothing
// about the customer); never an address, a name or any text of a
// customer's. The context a span's work runs under carries the span, so
// that log records made under it can name it.
type Tracer interface {
	// Start starts a span named name, the child of ctx's span, that
	// began at start (zero: now), and returns ctx carrying it.
	Start(ctx context.Context, name string, start time.Time, attrs ...slog.Attr) (context.Context, Span)
}

// Span is one timed piece of a run's work.
type Span interface {
	SetAttributes(attrs ...slog.Attr)
	// RecordError records a failure and its class (errorClass, or a
	// send's digest.SendClass) and marks the span failed. The error's
	// text must hold no address: the caller redacts it.
	RecordError(err error, class string)
	End()
}

// noTracer is the default Tracer: a run without tracing does no span work
// beyond an interface call per batch.
type noTracer struct{}

func (noTracer) Start(ctx context.Context, _ string, _ time.Time, _ ...slog.Attr) (context.Context, Span) {
	return ctx, noSpan{}
}

type noSpan struct{}

func (noSpan) SetAttributes(...slog.Attr) {}
func (noSpan) RecordError(error, string)  {}
func (noSpan) End()                       {}

// Span names, and the attribute names of the spans about one key.
const (
	spanRun          = "digest run"
	spanPass         = "pass"
	spanClaimBatch   = "claim batch"
	spanStartChunk   = "start chunk"
	spanFinishBatch  = "finish batch"
	spanLookup       = "look-up"
	spanSend         = "send"
	attrBatchSize    = "batch.size"    // the keys of one ledger call
	attrKey          = "digest.key"    // the key's HMAC hex
	attrKeyID        = "digest.key_id" // the keyring secret it was made with
	classLedger      = "ledger"
	classLookup      = "lookup"
	classInterrupted = "interrupted"
)

// keyAttrs are the attributes of a span about one key: its HMAC hex and
// key id, never the customer's identity.
func keyAttrs(k digest.Key) []slog.Attr {
	return []slog.Attr{slog.String(attrKey, k.Hex()), slog.String(attrKeyID, k.KeyID())}
}

// errorClass is the class a run-level error is recorded under: what an
// operator does about it differs by class.
func errorClass(err error) string {
	var pruned *PrunedWeekError
	var early *BeforeCutoffError
	switch {
	case errors.Is(err, ErrMailerUnreachable):
		return "mailer_unreachable"
	case errors.Is(err, ErrMailerUnusable):
		return "mailer_unusable"
	case errors.As(err, &pruned):
		return "pruned_week"
	case errors.As(err, &early):
		return "before_cutoff"
	case errors.Is(err, ErrConfig):
		return "config"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return classInterrupted
	}
	return "failure"
}

// outcomeAttrs counts a claim batch's answers by outcome, as the
// attributes claim.<outcome> (claim.claimed, claim.already_sent, ...).
func outcomeAttrs(res []digest.ClaimResult) []slog.Attr {
	var n [8]int
	for _, c := range res {
		if int(c.Outcome) < len(n) {
			n[c.Outcome]++
		}
	}
	var attrs []slog.Attr
	for o, c := range n {
		if c > 0 {
			attrs = append(attrs, slog.Int("claim."+digest.Outcome(o).String(), c))
		}
	}
	return attrs
}

// startRunSpan starts the run's span, named by what the run sends.
func (r *Runner) startRunSpan(ctx context.Context) (context.Context, Span) {
	cfg := &r.Config
	return cfg.Tracer.Start(ctx, spanRun, time.Time{},
		slog.String("digest.week", cfg.Spec.Week.String()), slog.String("digest.type", cfg.Spec.Type),
		slog.String("digest.version", cfg.Spec.Version), slog.String("digest.shard", cfg.Shard.String()),
		slog.String("digest.mode", string(cfg.Mode)))
}

// endRunSpan ends the run's span with the summary's main counters.
func endRunSpan(span Span, sum Summary, err error) {
	span.SetAttributes(slog.Int("run.sent", sum.Sent), slog.Int("run.duplicates", sum.Duplicates),
		slog.Int("run.pending", sum.Pending), slog.Int("run.failed", sum.Failed), slog.Int("run.held", sum.Held),
		slog.Int("run.passes", sum.Passes), slog.Int("run.digests", sum.Digests), slog.Bool("run.interrupted", sum.Interrupted))
	if err != nil {
		span.RecordError(err, errorClass(err))
	}
	span.End()
}

// runTraced runs the pass under a span of its own.
func (p *pass) runTraced(ctx context.Context, q digest.SourceQuery) error {
	ctx, span := p.runner.Config.Tracer.Start(ctx, spanPass, time.Time{},
		slog.Int("pass.number", p.number), slog.Bool("pass.retry", p.pendingOnly))
	defer span.End()
	err := p.run(ctx, q)
	if err != nil {
		span.RecordError(err, errorClass(err))
	}
	return err
}

// endLedgerSpan ends the span of a ledger call that failed. A call that
// failed once the run was interrupted (ctx done) is recorded as such, not
// as the ledger's failure.
func endLedgerSpan(ctx context.Context, span Span, err error) {
	class := classLedger
	if ctx.Err() != nil {
		class = classInterrupted
	}
	span.RecordError(err, class)
	span.End()
}

// lookup asks the provider whether it accepted a maybe-sent claim, under a
// span about its key, and returns the span's context for what follows
// from the answer.
func (p *pass) lookup(ctx context.Context, it *item) (_ context.Context, ref string, found bool, err error) {
	ctx, span := p.runner.Config.Tracer.Start(ctx, spanLookup, time.Time{}, keyAttrs(it.claim.Key)...)
	defer span.End()
	ref, found, err = p.runner.Lookup.Lookup(ctx, it.claim.Key)
	span.SetAttributes(slog.Bool("lookup.found", found))
	if err != nil {
		span.RecordError(err, classLookup)
	}
	return ctx, ref, found, err
}

// traceSendFailure records a failed send as a span about its key, from
// when the send began, classed by digest.SendClass; it returns the span's
// context for the log records about the failure. Sends that succeed make
// no span: one per digest would cost more than the send's own work.
func (p *pass) traceSendFailure(ctx context.Context, it *item, began time.Time, err error) context.Context {
	attrs := append(keyAttrs(it.claim.Key), slog.String("send.kind", failureKind(err)))
	ctx, span := p.runner.Config.Tracer.Start(ctx, spanSend, began, attrs...)
	// The reply may repeat the address: redacted, as in the ledger.
	span.RecordError(errors.New(digest.RedactAddress(err.Error(), it.msg.To.Email)), digest.SendClassOf(err).String())
	span.End()
	return ctx
}
