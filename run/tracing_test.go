package run_test

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/run"
)

// recorder is a run.Tracer that keeps every span it starts.
type recorder struct {
	mu    sync.Mutex
	spans []*span
}

type span struct {
	id, parent int
	name       string
	attrs      map[string]slog.Value
	err        error
	class      string
	ended      bool
}

type spanKey struct{}

func (r *recorder) Start(ctx context.Context, name string, _ time.Time, attrs ...slog.Attr) (context.Context, run.Span) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &span{id: len(r.spans) + 1, name: name, attrs: map[string]slog.Value{}}
	if p, ok := ctx.Value(spanKey{}).(*span); ok {
		s.parent = p.id
	}
	s.set(attrs)
	r.spans = append(r.spans, s)
	return context.WithValue(ctx, spanKey{}, s), &recorded{r, s}
}

func (s *span) set(attrs []slog.Attr) {
	for _, a := range attrs {
		s.attrs[a.Key] = a.Value
	}
}

// recorded is a span as the run holds it; the recorder's lock guards it.
type recorded struct {
	r *recorder
	s *span
}

func (x *recorded) SetAttributes(attrs ...slog.Attr) {
	x.r.mu.Lock()
	x.s.set(attrs)
	x.r.mu.Unlock()
}

func (x *recorded) RecordError(err error, class string) {
	x.r.mu.Lock()
	x.s.err, x.s.class = err, class
	x.r.mu.Unlock()
}

func (x *recorded) End() {
	x.r.mu.Lock()
	x.s.ended = true
	x.r.mu.Unlock()
}

// spanCheck is a slog.Handler that notes every record made outside a
// span: a log call without the context at hand.
type spanCheck struct {
	mu      *sync.Mutex
	outside *[]string
}

func (spanCheck) Enabled(context.Context, slog.Level) bool { return true }
func (h spanCheck) WithAttrs([]slog.Attr) slog.Handler     { return h }
func (h spanCheck) WithGroup(string) slog.Handler          { return h }
func (h spanCheck) Handle(ctx context.Context, r slog.Record) error {
	if _, ok := ctx.Value(spanKey{}).(*span); !ok {
		h.mu.Lock()
		*h.outside = append(*h.outside, r.Message)
		h.mu.Unlock()
	}
	return nil
}

// addressEcho fails each digest's first send ambiguously with a reply that
// repeats the address, as SMTP servers' do; later sends go to the provider.
type addressEcho struct{ *provider }

func (m addressEcho) Send(ctx context.Context, msg *digest.Message) (string, error) {
	ref, err := m.provider.Send(ctx, msg)
	if err != nil {
		return "", &digest.SendError{Class: digest.SendAmbiguous, Err: errors.New("connection lost after DATA for <" + msg.To.Email + ">")}
	}
	return ref, nil
}

// A run reports its spans: the run's, with what it sends, over its passes,
// each over its claim batches, start chunks and finish batches, and a span
// per key for a failed send and a look-up, named by the key's HMAC hex.
// No span carries an address, and every log record is made under a span.
func TestRunSpans(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 24)
	p := newProvider()
	p.script = func(_ digest.Key, attempt int) (bool, error) {
		if attempt == 1 {
			return true, errors.New("dropped")
		}
		return true, nil
	}
	var mu sync.Mutex
	var outside []string
	tr := &recorder{}
	r := f.runner(p, p, func(c *run.Config) {
		c.Deadline = f.clock.Now().Add(24 * time.Hour)
		c.Tracer = tr
		c.Logger = slog.New(spanCheck{&mu, &outside})
	})
	r.Mailer = addressEcho{p}
	if sum := f.run(r); sum.Reconciled != f.want || sum.Passes < 2 {
		t.Fatalf("summary %+v: want every digest reconciled by a look-up in a retry pass", sum)
	}
	if len(outside) > 0 {
		t.Errorf("log records made outside any span (a log call without ctx): %q", outside)
	}

	byID := map[int]*span{}
	count := map[string]int{}
	for _, s := range tr.spans {
		byID[s.id] = s
		count[s.name]++
	}
	root := tr.spans[0]
	want := map[string]string{"digest.week": "2026-W40", "digest.type": "weekly_activity", "digest.version": "v1", "digest.shard": "all", "digest.mode": "enforce"}
	for k, v := range want {
		if got, ok := root.attrs[k]; root.name != "digest run" || !ok || got.String() != v {
			t.Errorf("root span %q: %s = %v, want %q", root.name, k, got, v)
		}
	}
	if count["digest run"] != 1 || count["pass"] < 2 || count["claim batch"] == 0 || count["start chunk"] == 0 || count["finish batch"] == 0 ||
		count["send"] != f.want || count["look-up"] != f.want {
		t.Errorf("spans by name %v; want 1 run, 2 passes or more, batches and chunks, %d sends and look-ups", count, f.want)
	}
	hex := regexp.MustCompile(`^[0-9a-f]{64}$`)
	for _, s := range tr.spans {
		if !s.ended {
			t.Errorf("span %q not ended", s.name)
		}
		parent := byID[s.parent]
		switch s.name {
		case "pass":
			if parent != root {
				t.Errorf("pass span's parent is %v, want the run's", parent)
			}
		case "claim batch", "start chunk", "finish batch", "send", "look-up":
			if parent == nil || parent.name != "pass" {
				t.Errorf("%s span's parent is %v, want a pass", s.name, parent)
			}
		}
		switch s.name {
		case "claim batch":
			if s.attrs["batch.size"].Int64() == 0 || s.attrs["claim.claimed"].Int64() == 0 && s.attrs["claim.busy"].Int64() == 0 && s.attrs["claim.not_due"].Int64() == 0 {
				t.Errorf("claim batch attributes %v; want its size and outcomes", s.attrs)
			}
		case "send":
			if s.class != "ambiguous" || s.err == nil || !strings.Contains(s.err.Error(), "<address>") {
				t.Errorf("send span: class %q, error %v; want ambiguous, the address redacted", s.class, s.err)
			}
			fallthrough
		case "look-up":
			if !hex.MatchString(s.attrs["digest.key"].String()) || s.attrs["digest.key_id"].String() != "k1" {
				t.Errorf("%s span attributes %v; want the key's HMAC hex and key id", s.name, s.attrs)
			}
		}
		for k, v := range s.attrs {
			if strings.Contains(v.String(), "@") {
				t.Errorf("%s span attribute %s = %q holds an address", s.name, k, v)
			}
		}
		if s.err != nil && strings.Contains(s.err.Error(), "@") {
			t.Errorf("%s span error %q holds an address", s.name, s.err)
		}
	}
}

// A run stopped by the unreachable mail server records its error and
// class on the run's span.
func TestRunSpanRecordsTheErrorClass(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 6)
	tr := &recorder{}
	r := f.runner(newProvider(), nil, func(c *run.Config) {
		c.Tracer = tr
		c.Preflight = func(context.Context) error { return errors.New("connection refused") }
	})
	if _, err := r.Run(context.Background()); !errors.Is(err, run.ErrMailerUnreachable) {
		t.Fatalf("run: %v, want ErrMailerUnreachable", err)
	}
	if root := tr.spans[0]; root.name != "digest run" || root.class != "mailer_unreachable" || root.err == nil || !root.ended {
		t.Fatalf("run span %+v; want the error, class mailer_unreachable", root)
	}
}
