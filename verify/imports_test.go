package verify_test

import (
	"os/exec"
	"strings"
	"testing"
)

// Package verify declares what it consumes and knows no adapter (like
// package run): it imports the standard library and the domain only, so
// the adapters under sender/ may assert its interfaces (in their tests).
func TestVerifyImportsOnlyTheDomain(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.Contains(strings.Split(p, "/")[0], ".") && p != "github.com/weeklydigest/digest/digest" {
			t.Errorf("verify imports %s", p)
		}
	}
}
