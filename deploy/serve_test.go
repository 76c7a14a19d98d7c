package deploy

import (
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestServeDeployment: "digest serve" runs as a Deployment of at least two
// pods kept by a PodDisruptionBudget, probed on /readyz and /healthz at
// the port it listens on; the Service, the budget and the NetworkPolicy
// select exactly its pods; the Ingress example sends the unsubscribe path
// of the ConfigMap's DIGEST_UNSUBSCRIBE_URL, and nothing else, to the
// Service over TLS.
func TestServeDeployment(t *testing.T) {
	t.Parallel()
	m := loadManifests(t)
	d, ok := m.deployments["serve-deployment.yaml"]
	if !ok || len(m.deployments) != 1 {
		t.Fatalf("deployments %v; want serve-deployment.yaml", len(m.deployments))
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Errorf("replicas %v; want at least 2", d.Spec.Replicas)
	}
	podLabels := labels.Set(d.Spec.Template.Labels)
	sel := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)
	if !sel.Matches(podLabels) {
		t.Fatalf("the Deployment's selector %v does not match its pods %v", sel, podLabels)
	}
	// The CronJob's pods must not be taken for the service's.
	for n, p := range m.podTemplates() {
		if n != "serve-deployment.yaml" && sel.Matches(labels.Set(p.Labels)) {
			t.Errorf("the serve selector %v matches the pods of %s", sel, n)
		}
	}
	c := d.Spec.Template.Spec.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("args %q; want serve", c.Args)
	}
	addr, _ := flagValue(c.Args, "listen-addr")
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("--listen-addr %q: %v", addr, err)
	}
	var http *corev1.ContainerPort
	for i, p := range c.Ports {
		if p.Name == "http" {
			http = &c.Ports[i]
		}
	}
	if http == nil || port != itoa(http.ContainerPort) {
		t.Fatalf("container port http %+v; want the --listen-addr port %s", http, port)
	}
	for what, probe := range map[string]*corev1.Probe{"/readyz": c.ReadinessProbe, "/healthz": c.LivenessProbe} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != what || probe.HTTPGet.Port.String() != "http" {
			t.Errorf("probe %s: %+v; want an HTTP GET of %s on port http", what, probe, what)
		}
	}
	if r := c.ReadinessProbe; r != nil && r.TimeoutSeconds <= 5 {
		t.Errorf("readiness timeout %ds: want more than the service's 5s ledger timeout", r.TimeoutSeconds)
	}
	if g := d.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g <= 20 {
		t.Errorf("terminationGracePeriodSeconds %v; want more than the service's 20s shutdown grace", g)
	}

	svc, ok := m.services["serve-service.yaml"]
	if !ok {
		t.Fatal("no serve-service.yaml")
	}
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) || len(svc.Spec.Selector) < len(d.Spec.Selector.MatchLabels) {
		t.Errorf("the Service selects %v; want the serve pods %v", svc.Spec.Selector, d.Spec.Selector.MatchLabels)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != "http" {
		t.Errorf("Service ports %+v; want one, to port http", svc.Spec.Ports)
	}

	pdb, ok := m.pdbs["serve-pdb.yaml"]
	if !ok || pdb.Spec.Selector == nil || !labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels).Matches(podLabels) {
		t.Fatalf("PodDisruptionBudget %+v; want one selecting the serve pods", pdb)
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() < 1 || int32(pdb.Spec.MinAvailable.IntValue()) >= *d.Spec.Replicas {
		t.Errorf("minAvailable %v with %d replicas: want at least 1 and fewer than the replicas (or no node drains)", pdb.Spec.MinAvailable, *d.Spec.Replicas)
	}

	np, ok := m.policies["serve-networkpolicy.yaml"]
	if !ok || !labels.SelectorFromSet(np.Spec.PodSelector.MatchLabels).Matches(podLabels) {
		t.Fatal("no NetworkPolicy selecting the serve pods")
	}
	if !slices.Contains(np.Spec.PolicyTypes, "Ingress") || !slices.Contains(np.Spec.PolicyTypes, "Egress") {
		t.Errorf("policyTypes %v; want Ingress and Egress", np.Spec.PolicyTypes)
	}
	for _, r := range np.Spec.Ingress {
		if len(r.Ports) == 0 || len(r.From) == 0 {
			t.Errorf("an ingress rule open to every port or every peer: %+v", r)
		}
		for _, p := range r.Ports {
			if p.Port == nil || p.Port.String() != "http" {
				t.Errorf("ingress port %v; want only http", p.Port)
			}
		}
	}
	dbURL, err := url.Parse(m.configMap(t).Data["DIGEST_DATABASE_URL"])
	if err != nil {
		t.Fatal(err)
	}
	dbPort := dbURL.Port()
	allowed := false
	for _, r := range np.Spec.Egress {
		for _, p := range r.Ports {
			allowed = allowed || (p.Port != nil && p.Port.String() == dbPort)
		}
	}
	if !allowed {
		t.Errorf("egress allows no traffic to the ledger's port %s", dbPort)
	}

	tpl := m.configMap(t).Data["DIGEST_UNSUBSCRIBE_URL"]
	u, err := url.Parse(strings.ReplaceAll(tpl, "{token}", "T"))
	if err != nil || !strings.HasSuffix(u.Path, "/T") {
		t.Fatalf("ConfigMap DIGEST_UNSUBSCRIBE_URL %q: want https://host/path/{token}", tpl)
	}
	prefix := strings.TrimSuffix(u.Path, "T")
	ing, ok := m.ingresses["ingress.example.yaml"]
	if !ok {
		t.Fatal("no ingress.example.yaml")
	}
	if len(ing.Spec.TLS) == 0 || len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].Host != u.Host || ing.Spec.Rules[0].HTTP == nil {
		t.Fatalf("Ingress %+v; want TLS and one rule for %s", ing.Spec, u.Host)
	}
	paths := ing.Spec.Rules[0].HTTP.Paths
	if len(paths) != 1 || paths[0].Path != prefix || paths[0].PathType == nil || *paths[0].PathType != "Prefix" ||
		paths[0].Backend.Service == nil || paths[0].Backend.Service.Name != svc.Name || paths[0].Backend.Service.Port.Name != svc.Spec.Ports[0].Name {
		t.Errorf("Ingress paths %+v; want only %s (Prefix) to Service %s port %s: /metrics stays inside", paths, prefix, svc.Name, svc.Spec.Ports[0].Name)
	}
	if slices.Contains(loadKustomization(t).Resources, "ingress.example.yaml") {
		t.Error("the kustomization applies the example Ingress")
	}
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
