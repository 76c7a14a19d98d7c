package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/internal/metrics"
)

const monitoringDir = "monitoring"

// prometheusRule is the part of the Prometheus Operator's PrometheusRule
// (monitoring.coreos.com/v1) that the alerts use; a CRD has no Go type in
// k8s.io/api, so strict decoding into this struct is the schema check: a
// misspelt or misplaced field fails.
type prometheusRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Groups []struct {
			Name     string `json:"name"`
			Interval string `json:"interval,omitempty"`
			Rules    []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for,omitempty"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

// dashboard is the part of a Grafana dashboard model the checks read.
type dashboard struct {
	UID    string `json:"uid"`
	Title  string `json:"title"`
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

var metricName = regexp.MustCompile(`\b(digest|go|process)_[a-z0-9_]+`)

// exprProblems returns what is wrong with a PromQL expression: metrics
// the job does not export, brackets or quotes that do not balance.
func exprProblems(expr string, exported map[string]bool) []string {
	var out []string
	names := metricName.FindAllString(expr, -1)
	if len(names) == 0 {
		out = append(out, "names no digest metric")
	}
	for _, n := range names {
		if !exported[n] {
			out = append(out, "uses "+n+", which the job does not export")
		}
	}
	depth := map[rune]int{}
	pairs := map[rune]rune{')': '(', '}': '{', ']': '['}
	for _, r := range expr {
		switch r {
		case '(', '{', '[':
			depth[r]++
		case ')', '}', ']':
			if depth[pairs[r]]--; depth[pairs[r]] < 0 {
				out = append(out, fmt.Sprintf("closes %c before opening it", r))
			}
		}
	}
	for r, d := range depth {
		if d > 0 {
			out = append(out, fmt.Sprintf("leaves %d %c open", d, r))
		}
	}
	if strings.Count(expr, `"`)%2 != 0 {
		out = append(out, "has an unclosed quote")
	}
	return out
}

func checkExpr(t *testing.T, where, expr string, exported map[string]bool) {
	t.Helper()
	for _, p := range exprProblems(expr, exported) {
		t.Errorf("%s: %q %s", where, expr, p)
	}
}

// weekStateNames are the gauges of a week's state that a run, "digest
// status" and the review commands push to the Pushgateway group
// job="digest_week", week (cmd/digest/status.go): what the per-week alerts
// resolve on.
var weekStateNames = []string{
	"digest_week_end_timestamp_seconds", "digest_week_complete", "digest_week_needs_review",
	"digest_week_customers", "digest_week_status_timestamp_seconds",
}

func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, n := range metrics.Names() {
		out[n] = true
	}
	for _, n := range weekStateNames {
		out[n] = true
	}
	if len(out) < 10 {
		t.Fatalf("metrics.Names() = %v: too few", out)
	}
	return out
}

func TestPrometheusRuleAlertsOnExportedMetrics(t *testing.T) {
	t.Parallel()
	var pr prometheusRule
	b := decodeFile(t, filepath.Join(monitoringDir, "prometheusrule.yaml"), &pr)
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" || pr.Metadata.Name == "" || pr.Metadata.Namespace != "digest" {
		t.Fatalf("prometheusrule.yaml: %s %s %s/%s; want a monitoring.coreos.com/v1 PrometheusRule in namespace digest",
			pr.APIVersion, pr.Kind, pr.Metadata.Namespace, pr.Metadata.Name)
	}
	exported := exportedNames(t)
	runbook, err := os.ReadFile(filepath.Join(repoRoot, "docs", "runbook.md"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, g := range pr.Spec.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("group %q with %d rules", g.Name, len(g.Rules))
		}
		for _, r := range g.Rules {
			where := "alert " + r.Alert
			if r.Alert == "" || seen[r.Alert] {
				t.Errorf("%s: want a unique alert name", where)
			}
			seen[r.Alert] = true
			if !slices.Contains([]string{"page", "ticket", "info"}, r.Labels["severity"]) {
				t.Errorf("%s: severity %q; want page, ticket or info", where, r.Labels["severity"])
			}
			if r.Annotations["summary"] == "" {
				t.Errorf("%s: no summary annotation", where)
			}
			// The runbook annotation names the alert's own section of the
			// runbook, by the anchor GitHub gives its heading.
			doc, anchor, _ := strings.Cut(r.Annotations["runbook"], "#")
			if doc != "docs/runbook.md" || anchor != strings.ToLower(r.Alert) || !slices.Contains(headingAnchors(string(runbook)), anchor) {
				t.Errorf("%s: runbook %q is not its section of docs/runbook.md (want docs/runbook.md#%s, a heading)", where, r.Annotations["runbook"], strings.ToLower(r.Alert))
			}
			checkExpr(t, where, r.Expr, exported)
			// The runbook explains each alert with its query: the same one.
			if !strings.Contains(strings.Join(strings.Fields(string(runbook)), " "), strings.Join(strings.Fields(r.Expr), " ")) {
				t.Errorf("%s: docs/runbook.md does not show its query %q", where, r.Expr)
			}
			// An age computed at the end of a run and pushed once never
			// grows: alert on time() minus a timestamp instead.
			if strings.Contains(r.Expr, "_age_seconds") {
				t.Errorf("%s: %q alerts on a pushed age", where, r.Expr)
			}
		}
	}
	if len(seen) < 8 {
		t.Errorf("%d alerts; the runbook explains more", len(seen))
	}
	if !strings.Contains(string(b), "time() - digest_oldest_retryable_timestamp_seconds") {
		t.Error("no alert on how long the oldest retryable receipt has waited (time() - digest_oldest_retryable_timestamp_seconds)")
	}
}

func TestGrafanaDashboardUsesExportedMetrics(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(monitoringDir, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(b) {
		t.Fatal("grafana-dashboard.json is not valid JSON")
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" || len(d.Panels) < 5 {
		t.Fatalf("dashboard uid %q, title %q, %d panels", d.UID, d.Title, len(d.Panels))
	}
	exported := exportedNames(t)
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			checkExpr(t, "panel "+p.Title, q.Expr, exported)
		}
	}
}

// TestCheckExprCatchesMistakes guards the guard.
func TestCheckExprCatchesMistakes(t *testing.T) {
	t.Parallel()
	exported := exportedNames(t)
	for _, bad := range []string{`digest_oldest_retryable_age_seconds > 0`, `sum(digest_pending`, `digest_receipts{state="held} > 0`, `vector(1)`} {
		if len(exprProblems(bad, exported)) == 0 {
			t.Errorf("exprProblems(%q) found nothing", bad)
		}
	}
	if p := exprProblems(`time() - digest_oldest_retryable_timestamp_seconds > 6 * 3600`, exported); len(p) > 0 {
		t.Errorf("a good expression: %v", p)
	}
}

// headingAnchors returns the anchors GitHub gives the Markdown headings of
// body: lower case, punctuation dropped, spaces as '-'.
func headingAnchors(body string) []string {
	var out []string
	for _, line := range strings.Split(body, "\n") {
		h, ok := strings.CutPrefix(line, "#")
		if !ok {
			continue
		}
		h = strings.TrimSpace(strings.TrimLeft(h, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}
