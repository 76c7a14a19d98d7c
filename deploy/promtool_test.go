package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// promtoolVersion is the Prometheus release whose promtool checks the
// rules: Debian 12's prometheus package, which scripts/test installs
// (ensure_promtool) when promtool is missing.
const promtoolVersion = "2.42.0"

// TestAlertRulesPassPromtool checks the PrometheusRule's groups with
// "promtool check rules" and runs the unit tests of every alert,
// monitoring/rules_test.yaml, with "promtool test rules": each alert
// fires, does not fire where it must not, and resolves. The rules are
// the spec of a Kubernetes object, so the test writes the spec alone to
// rules.yaml beside a copy of the tests. Without promtool the test fails:
// scripts/test installs it.
func TestAlertRulesPassPromtool(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (%v): scripts/test installs it (Debian's prometheus package, %s)", err, promtoolVersion)
	}
	if out, err := exec.Command(promtool, "--version").CombinedOutput(); err != nil || !strings.Contains(string(out), "version "+promtoolVersion) {
		t.Logf("promtool --version: %s (%v); the tests are written for %s", strings.TrimSpace(string(out)), err, promtoolVersion)
	}
	// The strict decoding is TestPrometheusRuleAlertsOnExportedMetrics's
	// schema check; the spec goes to promtool as it is.
	var rules prometheusRule
	b := decodeFile(t, filepath.Join(monitoringDir, "prometheusrule.yaml"), &rules)
	var pr struct {
		Spec map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &pr); err != nil {
		t.Fatal(err)
	}
	spec, err := yaml.Marshal(pr.Spec)
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join(monitoringDir, "rules_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, content := range map[string][]byte{"rules.yaml": spec, "rules_test.yaml": tests} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "rules_test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	// Every alert has unit tests.
	for _, g := range rules.Spec.Groups {
		for _, r := range g.Rules {
			if !strings.Contains(string(tests), "alertname: "+r.Alert+"\n") {
				t.Errorf("alert %s has no test in rules_test.yaml", r.Alert)
			}
		}
	}
}
