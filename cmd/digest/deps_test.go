package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryLinksNoTestCode keeps the production binary free of test code
// and the benchmark: "go list -deps ./cmd/digest" must not name the testing
// package, an SMTP server library or a test harness. The benchmark is
// cmd/digest-bench. A new dependency that imports "testing" outside its
// tests (go-abnf before v0.5.5, through prometheus/common) fails here;
// "go mod why -m MODULE" says who pulls it in.
func TestBinaryLinksNoTestCode(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	forbidden := []string{
		"testing",
		"github.com/emersion/go-smtp",
		"github.com/weeklydigest/digest/internal/pgtest",
		"github.com/weeklydigest/digest/internal/mailpittest",
		"github.com/weeklydigest/digest/internal/e2etest",
		"github.com/weeklydigest/digest/internal/bench",
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages; want the binary's whole graph:\n%s", len(deps), out)
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("the digest binary depends on %s", dep)
			}
		}
	}
}
