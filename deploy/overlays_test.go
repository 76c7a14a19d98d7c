package deploy

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// overlayDir holds one kustomization per environment; each builds on
// kubernetes/ (the base) and monitoring/.
const overlayDir = "overlays"

// overlays are the environments the deploy module checks: they must all
// exist and build.
var overlays = []string{"staging", "production"}

// kustomizeBuild is "kustomize build dir" (kustomize's own library, with
// its default options: no files from outside the kustomization's tree),
// every object decoded strictly into its API type and filed as Kind/name.
func kustomizeBuild(t *testing.T, dir string) *manifests {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	m := newManifests()
	for _, r := range res.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		name := r.GetKind() + "/" + r.GetName()
		m.add(t, name, b)
	}
	return m
}

// forEachBuild runs check on the manifest files as kubectl apply -k of
// the base applies them (and the templates created on their own), and on
// the build of every overlay.
func forEachBuild(t *testing.T, check func(t *testing.T, m *manifests)) {
	t.Helper()
	t.Run("base", func(t *testing.T) {
		t.Parallel()
		check(t, loadManifests(t))
	})
	for _, o := range overlays {
		t.Run(o, func(t *testing.T) {
			t.Parallel()
			check(t, kustomizeBuild(t, filepath.Join(overlayDir, o)))
		})
	}
	t.Run("schedule", func(t *testing.T) {
		t.Parallel()
		check(t, scheduleBuild(t))
	})
}

// scheduleBuild is the build of an overlay of the base and the monitoring
// with the component components/schedule ("digest schedule" instead of
// the weekly CronJob), written to a temporary directory.
func scheduleBuild(t *testing.T) *manifests {
	t.Helper()
	dir := t.TempDir()
	// kustomize takes no absolute path: each relative to dir.
	rel := func(p string) string {
		a, err := filepath.Abs(p)
		if err == nil {
			a, err = filepath.Rel(dir, a)
		}
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	// No images: entry, as the overlays: the component's pod takes the
	// base's tag by itself.
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - %s\n  - %s\ncomponents:\n  - %s\n",
		rel(manifestDir), rel(monitoringDir), rel(filepath.Join("components", "schedule")))
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return kustomizeBuild(t, dir)
}

// TestOverlaysBuild: every overlay builds, its kustomization decodes
// strictly, and holds the base's objects and the monitoring; every
// directory under overlays/ is one the tests know. (The image tag of
// their pods: TestOneReleaseTag.)
func TestOverlaysBuild(t *testing.T) {
	t.Parallel()
	dirs, err := os.ReadDir(overlayDir)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, d := range dirs {
		found = append(found, d.Name())
	}
	if slices.Sort(found); !slices.Equal(found, slices.Sorted(slices.Values(overlays))) {
		t.Errorf("overlays/ holds %v; the tests check %v", found, overlays)
	}
	for _, o := range overlays {
		var k kustomization
		decodeFile(t, filepath.Join(overlayDir, o, "kustomization.yaml"), &k)
		if !slices.Contains(k.Resources, "../../kubernetes") || !slices.Contains(k.Resources, "../../monitoring") {
			t.Errorf("%s: resources %v; want the base ../../kubernetes and ../../monitoring", o, k.Resources)
		}
		m := kustomizeBuild(t, filepath.Join(overlayDir, o))
		if len(m.cronJobs) < 2 || len(m.deployments) != 1 || len(m.jobs) != 1 || len(m.serviceMonitors) != 1 || len(m.rules) != 1 || len(m.policies) != 3 {
			t.Errorf("%s: %d CronJobs, %d Deployments, %d Jobs, %d ServiceMonitors, %d PrometheusRules, %d NetworkPolicies; want the base's and monitoring's",
				o, len(m.cronJobs), len(m.deployments), len(m.jobs), len(m.serviceMonitors), len(m.rules), len(m.policies))
		}
	}
}

// TestOverlaysDiffer: each overlay changes what it says it does, so a
// patch that no longer matches its target (and so changes nothing) fails.
func TestOverlaysDiffer(t *testing.T) {
	t.Parallel()
	staging := kustomizeBuild(t, filepath.Join(overlayDir, "staging"))
	production := kustomizeBuild(t, filepath.Join(overlayDir, "production"))
	if got := *staging.deployments["Deployment/digest-serve"].Spec.Replicas; got != 2 {
		t.Errorf("staging serve replicas %d; want 2", got)
	}
	if got := *production.deployments["Deployment/digest-serve"].Spec.Replicas; got != 3 {
		t.Errorf("production serve replicas %d; want 3", got)
	}
	if s, p := staging.cronJobs["CronJob/digest"].Spec.Schedule, production.cronJobs["CronJob/digest"].Spec.Schedule; s == p {
		t.Errorf("staging and production both run at %q; staging runs first", s)
	}
	if r := staging.configMaps["ConfigMap/digest-config"].Data["DIGEST_RATE"]; r != "10" {
		t.Errorf("staging DIGEST_RATE %q; want 10", r)
	}
	c := production.cronJobs["CronJob/digest"].Spec.JobTemplate.Spec.Template.Spec.Containers[0]
	if got := c.Resources.Limits.Memory().String(); got != "512Mi" {
		t.Errorf("production weekly memory limit %s; want 512Mi", got)
	}
	// The patch merges into the base's env: the secrets' files stay.
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "DIGEST_HMAC_KEYS_FILE" }) {
		t.Errorf("production weekly env %v lost the base's variables", c.Env)
	}
}

// securitySchema is the schema docs/security.md's roles own and are
// granted on: the search_path every database URL must set.
func securitySchema(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("`search_path=([a-z_]+)`").FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/security.md names no search_path=SCHEMA")
	}
	return string(m[1])
}

// TestDatabaseURLsSetTheSearchPath: the roles of docs/security.md are
// granted on their schema, not public; a URL without its search_path
// would find no table.
func TestDatabaseURLsSetTheSearchPath(t *testing.T) {
	t.Parallel()
	schema := securitySchema(t)
	forEachBuild(t, func(t *testing.T, m *manifests) {
		var urls []string
		for n, c := range m.configMaps {
			if u, ok := c.Data["DIGEST_DATABASE_URL"]; ok {
				urls = append(urls, n+"="+u)
			}
		}
		for n, p := range m.podTemplates() {
			for _, e := range p.Spec.Containers[0].Env {
				if e.Name == "DIGEST_DATABASE_URL" {
					urls = append(urls, n+"="+e.Value)
				}
			}
		}
		if len(urls) < 3 {
			t.Fatalf("%d database URLs (%v); want the ConfigMap's and the owner's", len(urls), urls)
		}
		for _, nu := range urls {
			n, raw, _ := strings.Cut(nu, "=")
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			if got := u.Query().Get("search_path"); got != schema {
				t.Errorf("%s: DIGEST_DATABASE_URL %s: search_path %q; want %q (docs/security.md)", n, raw, got, schema)
			}
		}
	})
}

// TestMigrateJobRerunsWithoutDeletion: the migrate Job runs before the
// others change (Argo CD PreSync hook, Helm pre-install/pre-upgrade
// hook, both deleting the last Job first), and for kubectl apply it
// deletes itself after it finished, under a fixed name (apply cannot
// create a generateName; kubectl wait names it), so the next upgrade's
// apply creates it anew instead of failing on an immutable Job.
func TestMigrateJobRerunsWithoutDeletion(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"argocd.argoproj.io/hook":               "PreSync",
		"argocd.argoproj.io/hook-delete-policy": "BeforeHookCreation",
		"helm.sh/hook":                          "pre-install,pre-upgrade",
		"helm.sh/hook-delete-policy":            "before-hook-creation",
	}
	forEachBuild(t, func(t *testing.T, m *manifests) {
		n := 0
		for name, j := range m.jobs {
			if j.Spec.Template.Spec.Containers[0].Args[0] != "migrate" {
				continue
			}
			n++
			for k, v := range want {
				if j.Annotations[k] != v {
					t.Errorf("%s: annotation %s=%q; want %q", name, k, j.Annotations[k], v)
				}
			}
			if j.Name == "" || j.GenerateName != "" {
				t.Errorf("%s: name %q, generateName %q; want a fixed name", name, j.Name, j.GenerateName)
			}
			ttl := ptrOr(j.Spec.TTLSecondsAfterFinished, 0)
			if ttl < 60 || ttl > 3600 {
				t.Errorf("%s: ttlSecondsAfterFinished %d; want a minute to an hour: time to wait for it, gone before the next upgrade", name, ttl)
			}
			if j.Labels["app.kubernetes.io/component"] != "migrate" {
				t.Errorf("%s: labels %v; the upgrade applies it alone by app.kubernetes.io/component=migrate", name, j.Labels)
			}
		}
		if n != 1 {
			t.Errorf("%d migrate Jobs; want one", n)
		}
	})
}

// TestServiceMonitorScrapesServe: the ServiceMonitor selects the serve
// Service (its labels, its namespace) and scrapes /metrics on a port the
// Service has; the NetworkPolicy lets the monitoring namespace in.
func TestServiceMonitorScrapesServe(t *testing.T) {
	t.Parallel()
	for _, o := range overlays {
		m := kustomizeBuild(t, filepath.Join(overlayDir, o))
		sm, ok := m.serviceMonitors["ServiceMonitor/digest-serve"]
		svc := m.services["Service/digest-serve"]
		if !ok || svc == nil {
			t.Fatalf("%s: no ServiceMonitor or Service digest-serve", o)
		}
		sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(svc.Labels)) {
			t.Errorf("%s: ServiceMonitor selector %v does not select the Service's labels %v (%v)", o, sm.Spec.Selector, svc.Labels, err)
		}
		if ns := sm.Spec.NamespaceSelector.MatchNames; !slices.Equal(ns, []string{svc.Namespace}) {
			t.Errorf("%s: ServiceMonitor namespaces %v; want [%s]", o, ns, svc.Namespace)
		}
		if len(sm.Spec.Endpoints) != 1 {
			t.Fatalf("%s: %d endpoints", o, len(sm.Spec.Endpoints))
		}
		ep := sm.Spec.Endpoints[0]
		if ep.Path != "/metrics" || !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }) {
			t.Errorf("%s: endpoint %s%s; want /metrics on a port of the Service %v", o, ep.Port, ep.Path, svc.Spec.Ports)
		}
		// The ServiceMonitor selects by labels; no other Service may carry them.
		for n, s := range m.services {
			if n != "Service/digest-serve" && sel.Matches(labels.Set(s.Labels)) {
				t.Errorf("%s: the ServiceMonitor also selects %s", o, n)
			}
		}
	}
}

// policyNamed returns the NetworkPolicy whose metadata name is name.
func (m *manifests) policyNamed(name string) *networkingv1.NetworkPolicy {
	for _, p := range m.policies {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// TestScheduleComponent: components/schedule replaces the weekly CronJob
// by one "digest schedule" pod (never two: Recreate), whose runs get the
// CronJob's flags and secrets, scraped by a ServiceMonitor through its
// Service on the --metrics-addr port, reachable from the monitoring
// namespace on that port alone, and kept by /healthz's 503 (behind) from
// no restart.
func TestScheduleComponent(t *testing.T) {
	t.Parallel()
	m := scheduleBuild(t)
	base := loadManifests(t)
	d, ok := m.deployments["Deployment/digest-schedule"]
	if !ok {
		t.Fatal("no Deployment digest-schedule")
	}
	if _, ok := m.cronJobs["CronJob/digest"]; ok {
		t.Error("the weekly CronJob is still there beside the schedule")
	}
	if len(m.cronJobs) != len(base.cronJobs)-1 {
		t.Errorf("%d CronJobs; want the base's %d less the weekly one", len(m.cronJobs), len(base.cronJobs))
	}
	if ptrOr(d.Spec.Replicas, 1) != 1 || d.Spec.Strategy.Type != "Recreate" {
		t.Errorf("replicas %d, strategy %q; want one pod, Recreate", ptrOr(d.Spec.Replicas, 1), d.Spec.Strategy.Type)
	}
	c := d.Spec.Template.Spec.Containers[0]
	i := slices.Index(c.Args, "--")
	if c.Args[0] != "schedule" || i < 0 {
		t.Fatalf("args %q; want schedule ... -- RUN FLAGS", c.Args)
	}
	helpOf(t).checkArgs(t, "schedule's runs", append([]string{"run"}, c.Args[i+1:]...))
	weekly := base.cronJobs["cronjob.yaml"].Spec.JobTemplate.Spec.Template.Spec.Containers[0]
	if !slices.Equal(c.Args[i+1:], weekly.Args[1:]) {
		t.Errorf("the schedule's run flags %q; want the CronJob's %q", c.Args[i+1:], weekly.Args[1:])
	}
	var files, want []string
	for _, e := range c.Env {
		if strings.HasSuffix(e.Name, "FILE") {
			files = append(files, e.Name)
		}
	}
	for _, e := range weekly.Env {
		if strings.HasSuffix(e.Name, "FILE") {
			want = append(want, e.Name)
		}
	}
	if slices.Sort(files); !slices.Equal(files, slices.Sorted(slices.Values(want))) {
		t.Errorf("secret files %v; want the weekly run's %v", files, want)
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet != nil {
		t.Errorf("liveness probe %+v; want one that is not /healthz (503 while behind)", p)
	}
	addr, _ := flagValue(c.Args[:i], "metrics-addr")
	var port *corev1.ContainerPort
	for j, p := range c.Ports {
		if p.Name == "metrics" {
			port = &c.Ports[j]
		}
	}
	if port == nil || addr != fmt.Sprintf(":%d", port.ContainerPort) {
		t.Fatalf("--metrics-addr %q, container port metrics %+v; want the same port", addr, port)
	}
	svc, sm := m.services["Service/digest-schedule"], m.serviceMonitors["ServiceMonitor/digest-schedule"]
	if svc == nil || sm == nil {
		t.Fatal("no Service or ServiceMonitor digest-schedule")
	}
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != "metrics" {
		t.Errorf("Service %+v; want the schedule pod's metrics port", svc.Spec)
	}
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	for n, s := range m.services {
		if got, want := sel.Matches(labels.Set(s.Labels)), n == "Service/digest-schedule"; got != want {
			t.Errorf("the schedule's ServiceMonitor selects %s: %v; want %v", n, got, want)
		}
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != svc.Spec.Ports[0].Name || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %+v; want /metrics on port %s", sm.Spec.Endpoints, svc.Spec.Ports[0].Name)
	}
	// The policies that select the pod: the jobs' (egress) and its own
	// (ingress from monitoring, on the metrics port alone).
	ingress := 0
	for n, p := range m.policies {
		ps, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		if err != nil || !ps.Matches(labels.Set(d.Spec.Template.Labels)) {
			continue
		}
		for _, r := range p.Spec.Ingress {
			ingress++
			for _, pt := range r.Ports {
				if pt.Port == nil || pt.Port.String() != "metrics" {
					t.Errorf("%s: ingress port %v; want only metrics", n, pt.Port)
				}
			}
			if len(r.From) != 1 || r.From[0].NamespaceSelector == nil || r.From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "monitoring" {
				t.Errorf("%s: ingress from %+v; want the monitoring namespace alone", n, r.From)
			}
		}
	}
	if ingress != 1 {
		t.Errorf("%d ingress rules select the schedule pod; want one, for Prometheus", ingress)
	}
}
