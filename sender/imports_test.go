package sender_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/weeklydigest/digest"

// The floors of the send side, as the package doc draws them: package
// sender at the bottom (the message as sent), one adapter per external
// system above it, and lookupurl, which only wires. Every package under
// sender/ must be named here, so that a new one is placed on purpose.
var (
	// adapters import sender, sender/internal/..., digest and third-party
	// packages, never another adapter or the wiring, tests included.
	adapters = []string{"sender/smtp", "sender/outbox", "sender/mailpit", "sender/postmark", "sender/events"}
	// wiring may import every adapter.
	wiring = []string{"sender/lookupurl"}
	// extra is what one adapter may import beyond the floor below it:
	// the events look-up reads the ledger's provider events.
	extra = map[string][]string{"sender/events": {"ledger"}}
)

// goList returns, for every package of patterns, its module-relative path
// and the module's packages it imports: its own files' (prod) and its
// tests' (test).
func goList(t *testing.T, patterns ...string) (prod, test map[string][]string) {
	t.Helper()
	args := append([]string{"list", "-f", `{{.ImportPath}}|{{join .Imports " "}}|{{join .TestImports " "}} {{join .XTestImports " "}}`}, patterns...)
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	rel := func(fields string) []string {
		var ps []string
		for _, p := range strings.Fields(fields) {
			if r, ok := strings.CutPrefix(p, module+"/"); ok {
				ps = append(ps, r)
			}
		}
		return ps
	}
	prod, test = map[string][]string{}, map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 3 {
			t.Fatalf("go list printed %q", line)
		}
		p := strings.TrimPrefix(f[0], module+"/")
		prod[p], test[p] = rel(f[1]), rel(f[2])
	}
	return prod, test
}

// Adapters never import each other (River's drivers import only
// riverdriver and rivertype): what two of them share lives one floor
// down, in package sender or sender/internal/...
func TestAdaptersImportOnlyTheFloorBelow(t *testing.T) {
	t.Parallel()
	prod, test := goList(t, "./...")
	below := func(p, imp string) bool {
		return imp == "digest" || imp == "sender" || strings.HasPrefix(imp, "sender/internal/") ||
			slices.Contains(extra[p], imp)
	}
	for p, imps := range prod {
		switch {
		case p == "sender":
			for _, imp := range imps {
				if imp != "digest" {
					t.Errorf("package sender imports %s: it is the floor the adapters stand on, and knows only the domain", imp)
				}
			}
		case strings.HasPrefix(p, "sender/internal/"):
			for _, imp := range imps {
				if !below(p, imp) {
					t.Errorf("%s imports %s: what the adapters share imports only sender and digest", p, imp)
				}
			}
		case slices.Contains(adapters, p):
			for _, imp := range imps {
				if !below(p, imp) {
					t.Errorf("adapter %s imports %s: an adapter imports sender, sender/internal/..., digest and third-party packages only", p, imp)
				}
			}
			for _, imp := range test[p] {
				if imp != p && (slices.Contains(adapters, imp) || slices.Contains(wiring, imp)) {
					t.Errorf("the tests of adapter %s import %s: adapters never import each other", p, imp)
				}
			}
		case slices.Contains(wiring, p):
		default:
			t.Errorf("%s is neither sender, sender/internal/..., an adapter nor the wiring: place it in imports_test.go", p)
		}
	}
	for _, p := range append(slices.Clone(adapters), wiring...) {
		if _, ok := prod[p]; !ok {
			t.Errorf("package %s does not exist", p)
		}
	}
}

// The send side lives under sender/ alone: no package of the module
// outside it talks SMTP, to Mailpit or Postmark, or writes the outbox.
func TestTheSendSideLivesUnderSender(t *testing.T) {
	t.Parallel()
	prod, _ := goList(t, module+"/...")
	for _, gone := range []string{"smtp", "lookup", "fileoutbox", "outbox", "mailpit", "postmark", "events"} {
		if _, ok := prod[gone]; ok {
			t.Errorf("package %s/%s exists: the send side's packages live under sender/", module, gone)
		}
	}
	if _, ok := prod["sender"]; !ok {
		t.Error("package sender does not exist")
	}
}
