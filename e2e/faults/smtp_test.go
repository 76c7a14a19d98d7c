package faults

import (
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/weeklydigest/digest/internal/e2etest"
)

// cutSome returns a seeded decision: drop the connection after about one
// message in three.
func cutSome(t *testing.T) func(int) bool {
	seed := rand.Uint64()
	t.Logf("SMTP cut seed %d", seed)
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 1))
	return func(int) bool {
		mu.Lock()
		defer mu.Unlock()
		return rng.IntN(3) == 0
	}
}

// The SMTP server stores the message, then the connection drops before its
// final reply reaches the job: the send is ambiguous. With a look-up, the
// retry pass finds each one at the provider and records it sent without
// sending again.
func TestSMTPDropAfterDataIsLookedUpNotResent(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(120, week40)
	px := startProxy(t, e.Mailpit.SMTPAddr(), cutSome(t))
	e.Set("DIGEST_SMTP_URL", "smtp://"+px.Addr()+"?tls=none")

	r := e.Run("run", "--week", week40s, "--deadline", "2m", "--lookup-delay", "1s", "--retry-backoff", "1s")
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	cuts := int(px.dataCuts.Load())
	t.Logf("NUMBERS smtp-drop-after-data: messages=%d cut=%d sent=%d reconciled=%d", px.messages.Load(), cuts, r.Count(t, "sent"), r.Count(t, "reconciled"))
	if cuts == 0 {
		t.Fatal("no connection was cut: the fault was not injected")
	}
	if got := r.Count(t, "reconciled"); got != cuts {
		t.Fatalf("reconciled %d, want one per cut connection (%d)", got, cuts)
	}
	e.AssertExactlyOnce(want)
	if rc := e.Receipts(); rc["sent"] != len(want) || len(rc) != 1 {
		t.Fatalf("receipts = %v", rc)
	}
}

// Without a look-up and with --ambiguous hold, each dropped send is held
// for review (exit 4) and never sent again; the rest are sent.
func TestSMTPDropAfterDataWithoutLookupHolds(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	e.Unset("DIGEST_LOOKUP_URL")
	want := e.Seed(120, week40)
	px := startProxy(t, e.Mailpit.SMTPAddr(), cutSome(t))
	e.Set("DIGEST_SMTP_URL", "smtp://"+px.Addr()+"?tls=none")

	r := e.Run("run", "--week", week40s, "--ambiguous", "hold", "--deadline", "0")
	cuts := int(px.dataCuts.Load())
	if cuts == 0 {
		t.Fatal("no connection was cut: the fault was not injected")
	}
	if r.Code != 4 || r.Count(t, "held") != cuts || !strings.Contains(r.Stderr, "digest review list") {
		t.Fatalf("exit %d, held %d; want 4 and %d held\n%s", r.Code, r.Count(t, "held"), cuts, r.Stderr)
	}
	again := e.Run("run", "--week", week40s, "--ambiguous", "hold", "--deadline", "0")
	if again.Count(t, "sent") != 0 {
		t.Fatalf("the rerun sent %d", again.Count(t, "sent"))
	}
	// Mailpit stored the dropped ones too: each customer exactly once.
	e.AssertExactlyOnce(want)
	list := e.MustRun("review", "list", "--limit", "1000").Stdout
	if n := strings.Count(list, " held "); n != cuts {
		t.Fatalf("review list shows %d held, want %d:\n%s", n, cuts, list)
	}
	t.Logf("NUMBERS smtp-drop-hold: cut=%d held=%d sent=%d", cuts, cuts, r.Count(t, "sent"))
}

// The SMTP server is down when the run starts: the run checks it before
// anything is pinned or claimed, says it is unreachable and exits 3 at
// once, leaving no receipt; a later run, with the server back, sends every
// digest once, at once (no backoff to wait out), without a look-up or a
// review.
func TestSMTPDownWholeRunThenLaterRunCompletes(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(60, week40)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close() // nothing listens there now

	down := e.RunEnv([]string{"DIGEST_SMTP_URL=smtp://" + dead + "?tls=none"}, "run", "--week", week40s, "--deadline", "1m")
	if down.Code != 3 || down.Count(t, "passes") != 0 || !strings.Contains(down.Stderr, "unreachable (nothing claimed)") {
		t.Fatalf("server down: exit %d, summary %v; want 3 before the first pass\n%s", down.Code, down.Summary(t), down.Stderr)
	}
	if rc := e.Receipts(); len(rc) != 0 {
		t.Fatalf("receipts %v while the server was down: want none", rc)
	}

	later := e.Run("run", "--week", week40s, "--deadline", "2m")
	if later.Code != 0 || later.Count(t, "passes") != 1 || later.Count(t, "reconciled") != 0 || later.Count(t, "held") != 0 {
		t.Fatalf("later run: exit %d, %v\n%s", later.Code, later.Summary(t), later.Stderr)
	}
	e.AssertExactlyOnce(want)
	t.Logf("NUMBERS smtp-down: exit %d, then sent=%d in one pass", down.Code, later.Count(t, "sent"))
}
