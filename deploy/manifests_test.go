package deploy

import (
	"bytes"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const (
	manifestDir = "kubernetes"
	// weekPlaceholder and imagePlaceholder are the parameters of the
	// backfill and sharded Job templates (kubectl create, not kustomize).
	weekPlaceholder  = "__WEEK__"
	imagePlaceholder = "__IMAGE__"
	// pushTimeout is what a run may spend on its metrics after SIGTERM
	// (cmd/digest's pushTimeout).
	pushTimeout = 10 * time.Second
	// defaultGrace is "digest run"'s --grace default.
	defaultGrace = 20 * time.Second
)

// manifests are every object under kubernetes/, decoded strictly, with the
// templates' placeholder replaced by a real week.
type manifests struct {
	cronJobs   map[string]*batchv1.CronJob // by file name
	jobs       map[string]*batchv1.Job
	configMaps map[string]*corev1.ConfigMap
	secrets    map[string]*corev1.Secret
	accounts   map[string]*corev1.ServiceAccount
	namespaces map[string]*corev1.Namespace
	// "digest serve" and what goes with it.
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	pdbs        map[string]*policyv1.PodDisruptionBudget
	policies    map[string]*networkingv1.NetworkPolicy
	ingresses   map[string]*networkingv1.Ingress
	// The Prometheus Operator's, in the overlays' builds.
	serviceMonitors map[string]*monitoringv1.ServiceMonitor
	rules           map[string]*monitoringv1.PrometheusRule
	// objects are all of the above, by the same names.
	objects map[string]metav1.Object
}

func newManifests() *manifests {
	return &manifests{cronJobs: map[string]*batchv1.CronJob{}, jobs: map[string]*batchv1.Job{},
		configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}, accounts: map[string]*corev1.ServiceAccount{}, namespaces: map[string]*corev1.Namespace{},
		deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{}, pdbs: map[string]*policyv1.PodDisruptionBudget{},
		policies: map[string]*networkingv1.NetworkPolicy{}, ingresses: map[string]*networkingv1.Ingress{},
		serviceMonitors: map[string]*monitoringv1.ServiceMonitor{}, rules: map[string]*monitoringv1.PrometheusRule{},
		objects: map[string]metav1.Object{}}
}

// decodeStrict decodes one YAML document into out, rejecting unknown and
// duplicate fields.
func decodeStrict(doc []byte, out any) error {
	return yaml.UnmarshalStrict(doc, out)
}

func loadManifests(t *testing.T) *manifests {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(manifestDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", manifestDir, err)
	}
	k := loadKustomization(t)
	m := newManifests()
	for _, f := range files {
		name := filepath.Base(f)
		if name == "kustomization.yaml" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.ReplaceAll(b, []byte(weekPlaceholder), []byte("2026-W40"))
		b = bytes.ReplaceAll(b, []byte(imagePlaceholder), []byte(k.image()))
		docs := bytes.Split(b, []byte("\n---"))
		if len(docs) != 1 {
			t.Errorf("%s: %d documents; want one object per file", name, len(docs))
		}
		m.add(t, name, docs[0])
	}
	// What "kubectl apply -k" applies: the images: entry sets the tag.
	for n, p := range m.podTemplates() {
		if slices.Contains(k.Resources, n) {
			for i, c := range p.Spec.Containers {
				p.Spec.Containers[i].Image = k.transform(c.Image)
			}
		}
	}
	return m
}

// add decodes one object strictly into its API type and files it under
// name (the file's name, or Kind/name in a kustomize build).
func (m *manifests) add(t *testing.T, name string, doc []byte) {
	t.Helper()
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var obj any
	switch tm.APIVersion + " " + tm.Kind {
	case "batch/v1 CronJob":
		obj = &batchv1.CronJob{}
		m.cronJobs[name] = obj.(*batchv1.CronJob)
	case "batch/v1 Job":
		obj = &batchv1.Job{}
		m.jobs[name] = obj.(*batchv1.Job)
	case "v1 ConfigMap":
		obj = &corev1.ConfigMap{}
		m.configMaps[name] = obj.(*corev1.ConfigMap)
	case "v1 Secret":
		obj = &corev1.Secret{}
		m.secrets[name] = obj.(*corev1.Secret)
	case "v1 ServiceAccount":
		obj = &corev1.ServiceAccount{}
		m.accounts[name] = obj.(*corev1.ServiceAccount)
	case "v1 Namespace":
		obj = &corev1.Namespace{}
		m.namespaces[name] = obj.(*corev1.Namespace)
	case "apps/v1 Deployment":
		obj = &appsv1.Deployment{}
		m.deployments[name] = obj.(*appsv1.Deployment)
	case "v1 Service":
		obj = &corev1.Service{}
		m.services[name] = obj.(*corev1.Service)
	case "policy/v1 PodDisruptionBudget":
		obj = &policyv1.PodDisruptionBudget{}
		m.pdbs[name] = obj.(*policyv1.PodDisruptionBudget)
	case "networking.k8s.io/v1 NetworkPolicy":
		obj = &networkingv1.NetworkPolicy{}
		m.policies[name] = obj.(*networkingv1.NetworkPolicy)
	case "networking.k8s.io/v1 Ingress":
		obj = &networkingv1.Ingress{}
		m.ingresses[name] = obj.(*networkingv1.Ingress)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		obj = &monitoringv1.ServiceMonitor{}
		m.serviceMonitors[name] = obj.(*monitoringv1.ServiceMonitor)
	case "monitoring.coreos.com/v1 PrometheusRule":
		obj = &monitoringv1.PrometheusRule{}
		m.rules[name] = obj.(*monitoringv1.PrometheusRule)
	default:
		t.Fatalf("%s: unexpected %s %s", name, tm.APIVersion, tm.Kind)
	}
	if err := decodeStrict(doc, obj); err != nil {
		t.Fatalf("%s: strict decoding: %v", name, err)
	}
	m.objects[name] = obj.(metav1.Object)
}

// kustomization is what kustomization.yaml holds, decoded strictly: a
// misspelt field fails.
type kustomization struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Labels     []struct {
		Pairs            map[string]string `json:"pairs"`
		IncludeSelectors bool              `json:"includeSelectors"`
	} `json:"labels"`
	Resources []string `json:"resources"`
	Patches   []patch  `json:"patches,omitempty"`
	Images    []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
		Digest  string `json:"digest,omitempty"`
	} `json:"images"`
}

// patch is one entry of a kustomization's patches: a file, and the
// object it applies to when it is a JSON patch.
type patch struct {
	Path   string `json:"path"`
	Target *struct {
		Kind string `json:"kind"`
		Name string `json:"name"`
	} `json:"target,omitempty"`
}

func loadKustomization(t *testing.T) *kustomization {
	t.Helper()
	var k kustomization
	decodeFile(t, filepath.Join(manifestDir, "kustomization.yaml"), &k)
	return &k
}

// decodeFile decodes the YAML file p strictly into out, or fails the test.
func decodeFile(t *testing.T, p string, out any) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := decodeStrict(b, out); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return b
}

// transform applies the images: entries to an image reference as
// kustomize does (a reference is name[:tag][@digest]).
func (k *kustomization) transform(ref string) string {
	name := ref
	if i := strings.Index(name, "@"); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	for _, im := range k.Images {
		if im.Name != name {
			continue
		}
		out := name
		if im.NewName != "" {
			out = im.NewName
		}
		if im.NewTag != "" {
			out += ":" + im.NewTag
		}
		if im.Digest != "" {
			out += "@" + im.Digest
		}
		return out
	}
	return ref
}

// image is the image every kustomized pod runs: the one images: entry.
func (k *kustomization) image() string {
	if len(k.Images) != 1 {
		return "(want one images: entry)"
	}
	return k.transform(k.Images[0].Name)
}

// podTemplates returns every pod template with where it comes from.
func (m *manifests) podTemplates() map[string]*corev1.PodTemplateSpec {
	out := map[string]*corev1.PodTemplateSpec{}
	for n, c := range m.cronJobs {
		out[n] = &c.Spec.JobTemplate.Spec.Template
	}
	for n, j := range m.jobs {
		out[n] = &j.Spec.Template
	}
	for n, d := range m.deployments {
		out[n] = &d.Spec.Template
	}
	return out
}

func (m *manifests) jobSpecs() map[string]*batchv1.JobSpec {
	out := map[string]*batchv1.JobSpec{}
	for n, c := range m.cronJobs {
		out[n] = &c.Spec.JobTemplate.Spec
	}
	for n, j := range m.jobs {
		out[n] = &j.Spec
	}
	return out
}

func (m *manifests) configMap(t *testing.T) *corev1.ConfigMap {
	t.Helper()
	if len(m.configMaps) != 1 {
		t.Fatalf("%d ConfigMaps; want one", len(m.configMaps))
	}
	for _, c := range m.configMaps {
		return c
	}
	return nil
}

// secretExample is the documented example of the Secret, which no
// kustomization applies.
var secretExample = filepath.Join("examples", "secret.example.yaml")

// exampleSecret decodes secretExample strictly: the keys the pods mount.
func exampleSecret(t *testing.T) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	decodeFile(t, secretExample, &s)
	if s.Kind != "Secret" || s.Name == "" || len(s.StringData) == 0 {
		t.Fatalf("%s: kind %q, name %q, %d keys; want the Secret's keys", secretExample, s.Kind, s.Name, len(s.StringData))
	}
	return &s
}

// flagValue returns the value of --name in args ("--name v" or "--name=v").
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == "--"+name && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func durationFlag(t *testing.T, where string, args []string, name string, def time.Duration) time.Duration {
	t.Helper()
	v, ok := flagValue(args, name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Errorf("%s: --%s %q: %v", where, name, v, err)
	}
	return d
}

func TestKustomizationResourcesExist(t *testing.T) {
	t.Parallel()
	k := loadKustomization(t)
	if k.Kind != "Kustomization" || len(k.Resources) == 0 {
		t.Fatalf("kustomization.yaml: kind %q with %d resources", k.Kind, len(k.Resources))
	}
	for _, r := range k.Resources {
		if _, err := os.Stat(filepath.Join(manifestDir, r)); err != nil {
			t.Errorf("kustomization resource %s: %v", r, err)
		}
	}
	for _, want := range []string{"cronjob.yaml", "configmap.yaml", "migrate-job.yaml",
		"serve-deployment.yaml", "serve-service.yaml", "serve-pdb.yaml", "serve-networkpolicy.yaml", "namespace.yaml", "mail-networkpolicy.yaml"} {
		if !slices.Contains(k.Resources, want) {
			t.Errorf("kustomization resources %v: want %s", k.Resources, want)
		}
	}
}

// TestImageTagSetOnce: the tag is in kustomization.yaml's images: entry
// alone. Kustomized pods name the image without a tag; the templates
// created on their own take the CronJob's image through a placeholder.
func TestImageTagSetOnce(t *testing.T) {
	t.Parallel()
	k := loadKustomization(t)
	if len(k.Images) != 1 || k.Images[0].NewTag == "" && k.Images[0].Digest == "" {
		t.Fatalf("kustomization.yaml images %+v: want one entry that sets the tag (or digest)", k.Images)
	}
	files, err := filepath.Glob(filepath.Join(manifestDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	images := regexp.MustCompile(`(?m)^\s*image:\s*(\S+)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		for _, m := range images.FindAllStringSubmatch(string(b), -1) {
			want := k.Images[0].Name
			if !slices.Contains(k.Resources, name) {
				want = imagePlaceholder
			}
			if m[1] != want {
				t.Errorf("%s: image %s; want %s (the tag is set once, in kustomization.yaml)", name, m[1], want)
			}
		}
	}
}

func TestCronJobSchedule(t *testing.T) {
	t.Parallel()
	m := loadManifests(t)
	weekly := 0
	for n, c := range m.cronJobs {
		s := c.Spec
		if tz := m.configMap(t).Data["DIGEST_TZ"]; s.TimeZone == nil || *s.TimeZone != tz {
			t.Errorf("%s: timeZone %v; want the ConfigMap's DIGEST_TZ %q (the week is computed in it)", n, s.TimeZone, tz)
		}
		if s.ConcurrencyPolicy != batchv1.ForbidConcurrent {
			t.Errorf("%s: concurrencyPolicy %q; want Forbid", n, s.ConcurrencyPolicy)
		}
		if s.StartingDeadlineSeconds == nil || *s.StartingDeadlineSeconds <= 0 {
			t.Errorf("%s: no startingDeadlineSeconds", n)
		}
		if s.Suspend != nil && *s.Suspend {
			t.Errorf("%s: suspended", n)
		}
		args := c.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args
		if args[0] != "run" {
			continue
		}
		weekly++
		if s.Schedule != "0 6 * * 1" {
			t.Errorf("%s: schedule %q; want Monday 06:00", n, s.Schedule)
		}
		if slices.Contains(args, "--week") {
			t.Errorf("%s: args %q; want run without --week (the week before now)", n, args)
		}
	}
	if weekly != 1 {
		t.Errorf("%d CronJobs run digest run; want one", weekly)
	}
}

func TestJobLimits(t *testing.T) {
	t.Parallel()
	forEachBuild(t, func(t *testing.T, m *manifests) {
		for n, s := range m.jobSpecs() {
			if s.BackoffLimit == nil && s.BackoffLimitPerIndex == nil {
				t.Errorf("%s: no backoffLimit", n)
			}
			if s.TTLSecondsAfterFinished == nil || *s.TTLSecondsAfterFinished <= 0 {
				t.Errorf("%s: no ttlSecondsAfterFinished", n)
			}
			c := s.Template.Spec.Containers[0]
			need := time.Duration(0)
			if c.Args[0] == "run" {
				if _, ok := flagValue(c.Args, "deadline"); !ok {
					t.Errorf("%s: args %q; want the per-pod limit as the run's own --deadline", n, c.Args)
				}
				need = jobDeadlineNeed(c.Args, ptrOr(s.BackoffLimit, ptrOr(s.BackoffLimitPerIndex, 6)))
			}
			if s.ActiveDeadlineSeconds == nil || time.Duration(*s.ActiveDeadlineSeconds)*time.Second <= need {
				t.Errorf("%s: activeDeadlineSeconds %d; want more than %s: every retry pod gets its whole --deadline", n, ptrOr(s.ActiveDeadlineSeconds, 0), need)
			}
			if p := s.PodFailurePolicy; p != nil {
				for _, r := range p.Rules {
					if r.OnExitCodes == nil {
						continue
					}
					if r.OnExitCodes.ContainerName == nil || *r.OnExitCodes.ContainerName != c.Name {
						t.Errorf("%s: podFailurePolicy names container %v; the container is %q", n, r.OnExitCodes.ContainerName, c.Name)
					}
					// 1 (failure) and 3 (incomplete) are worth a retry.
					if slices.Contains(r.OnExitCodes.Values, 1) || slices.Contains(r.OnExitCodes.Values, 3) {
						t.Errorf("%s: podFailurePolicy %s on exit codes %v: 1 and 3 must be retried", n, r.Action, r.OnExitCodes.Values)
					}
				}
			}
		}
	})
}

// podStart is what a pod may take to be scheduled and started (image
// pull included) before its run begins.
const podStart = time.Minute

// jobDeadlineNeed is how long a run Job must be allowed to live so that
// each of its pods (the first and backoffLimit retries, one after the
// other) ends by itself: it stops at --deadline (exit 3), finishes within
// --grace and pushes its metrics; between pods Kubernetes waits its pod
// failure back-off (10s, doubling, at most 6 minutes).
func jobDeadlineNeed(args []string, retries int32) time.Duration {
	perPod := durationFlagOr(args, "deadline", 30*time.Minute) + durationFlagOr(args, "grace", defaultGrace) + pushTimeout + podStart
	need := time.Duration(retries+1) * perPod
	backoff := 10 * time.Second
	for range retries {
		need += backoff
		backoff = min(2*backoff, 6*time.Minute)
	}
	return need
}

func durationFlagOr(args []string, name string, def time.Duration) time.Duration {
	if v, ok := flagValue(args, name); ok {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

// The runbook's promise for a Job that hits --deadline: the retry pod
// continues with the time --deadline gives it. One hour for three
// retries of 45 minutes (what the manifests had) breaks it.
func TestJobDeadlineSizedForRetries(t *testing.T) {
	t.Parallel()
	args := []string{"run", "--deadline", "45m", "--grace", "30s"}
	if got := jobDeadlineNeed(args, 3); got != 4*(45*time.Minute+30*time.Second+pushTimeout+podStart)+70*time.Second {
		t.Errorf("jobDeadlineNeed(45m, 3 retries) = %s", got)
	}
	if jobDeadlineNeed(args, 3) <= time.Hour {
		t.Error("an hour would do for three retries of 45 minutes?")
	}
}

func TestShardedJobIsIndexed(t *testing.T) {
	t.Parallel()
	m := loadManifests(t)
	found := false
	for n, j := range m.jobs {
		args := j.Spec.Template.Spec.Containers[0].Args
		shard, ok := flagValue(args, "shard")
		if !ok {
			continue
		}
		found = true
		s := j.Spec
		if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
			t.Errorf("%s: --shard %s without completionMode Indexed", n, shard)
		}
		want := fmt.Sprintf("/%d", ptrOr(s.Completions, 0))
		if shard != want || s.Parallelism == nil || *s.Parallelism != ptrOr(s.Completions, 0) {
			t.Errorf("%s: --shard %s, completions %d, parallelism %d; want --shard /N with N completions in parallel", n, shard, ptrOr(s.Completions, 0), ptrOr(s.Parallelism, 0))
		}
	}
	if !found {
		t.Error("no Job runs with --shard")
	}
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func TestTemplatesTakeTheWeek(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"backfill-job.yaml", "sharded-job.yaml"} {
		b, err := os.ReadFile(filepath.Join(manifestDir, name))
		if err != nil {
			t.Fatal(err)
		}
		var j batchv1.Job
		if err := decodeStrict(b, &j); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if w, _ := flagValue(j.Spec.Template.Spec.Containers[0].Args, "week"); w != weekPlaceholder {
			t.Errorf("%s: --week %q; want the placeholder %s", name, w, weekPlaceholder)
		}
		if j.GenerateName == "" || j.Name != "" {
			t.Errorf("%s: want generateName (one Job per kubectl create), not a fixed name", name)
		}
	}
	m := loadManifests(t)
	migrate := 0
	for _, j := range m.jobs {
		if j.Spec.Template.Spec.Containers[0].Args[0] == "migrate" {
			migrate++
		}
	}
	if migrate != 1 {
		t.Errorf("%d Jobs run digest migrate; want one", migrate)
	}
}

func TestPodsAreRestricted(t *testing.T) {
	t.Parallel()
	forEachBuild(t, func(t *testing.T, m *manifests) {
		images := map[string]bool{}
		for n, p := range m.podTemplates() {
			s := p.Spec
			if _, long := m.deployments[n]; long && s.RestartPolicy != corev1.RestartPolicyAlways {
				t.Errorf("%s: restartPolicy %q; want Always (a Deployment's pod)", n, s.RestartPolicy)
			} else if !long && s.RestartPolicy != corev1.RestartPolicyNever {
				t.Errorf("%s: restartPolicy %q; want Never (the Job retries with a new pod)", n, s.RestartPolicy)
			}
			if s.AutomountServiceAccountToken == nil || *s.AutomountServiceAccountToken {
				t.Errorf("%s: the service account token is mounted", n)
			}
			if s.HostNetwork || s.HostPID || s.HostIPC {
				t.Errorf("%s: shares a host namespace", n)
			}
			psc := s.SecurityContext
			if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("%s: pod securityContext %+v; want runAsNonRoot and seccomp RuntimeDefault", n, psc)
			}
			if len(s.Containers) != 1 || len(s.InitContainers) != 0 {
				t.Fatalf("%s: %d containers; want one", n, len(s.Containers))
			}
			c := s.Containers[0]
			images[c.Image] = true
			sc := c.SecurityContext
			switch {
			case sc == nil:
				t.Errorf("%s: container without securityContext", n)
			case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
				t.Errorf("%s: root file system is writable", n)
			case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
				t.Errorf("%s: privilege escalation allowed", n)
			case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
				t.Errorf("%s: capabilities %+v; want drop ALL, add none", n, sc.Capabilities)
			case sc.Privileged != nil && *sc.Privileged:
				t.Errorf("%s: privileged", n)
			case sc.RunAsUser != nil && *sc.RunAsUser == 0:
				t.Errorf("%s: runs as root", n)
			}
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if _, ok := c.Resources.Requests[r]; !ok {
					t.Errorf("%s: no %s request", n, r)
				}
			}
			if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
				t.Errorf("%s: no memory limit", n)
			}
			grace := durationFlag(t, n, c.Args, "grace", defaultGrace)
			if s.TerminationGracePeriodSeconds == nil || time.Duration(*s.TerminationGracePeriodSeconds)*time.Second <= grace+pushTimeout {
				t.Errorf("%s: terminationGracePeriodSeconds %v; want more than --grace %s + %s for the metrics push", n, s.TerminationGracePeriodSeconds, grace, pushTimeout)
			}
			for _, v := range s.Volumes {
				if v.HostPath != nil {
					t.Errorf("%s: hostPath volume %s", n, v.Name)
				}
			}
		}
		if len(images) != 1 {
			t.Errorf("images %v: want one image for every pod (upgrade them together)", slices.Collect(maps.Keys(images)))
		}
	})
}

// secretFiles are the *_FILE variables (and PGPASSFILE) each command
// needs, and so the only keys of the Secret its pods may mount.
var secretFiles = map[string][]string{
	"run":     {"DIGEST_HMAC_KEYS_FILE", "DIGEST_UNSUBSCRIBE_KEYS_FILE", "DIGEST_SMTP_PASSWORD_FILE", "DIGEST_POSTMARK_TOKEN_FILE", "PGPASSFILE"},
	"prune":   {"PGPASSFILE"},
	"migrate": {"PGPASSFILE"},
	"serve":   {"DIGEST_HMAC_KEYS_FILE", "DIGEST_UNSUBSCRIBE_KEYS_FILE", "PGPASSFILE"},
}

// ownerKey is the Secret's key holding the owner role's pgpass line.
const ownerKey = "pgpass-owner"

// TestPodsUseConfigAndSecrets: settings come from the ConfigMap, secrets
// from files of the Secret named by *_FILE variables, each pod mounts the
// keys it needs and no other, and every DIGEST_ variable is one digest
// reads.
func TestPodsUseConfigAndSecrets(t *testing.T) {
	t.Parallel()
	m := loadManifests(t)
	help := helpOf(t)
	cm, secret := m.configMap(t), exampleSecret(t)
	for k := range cm.Data {
		if strings.HasPrefix(k, "DIGEST_") && !help.env[k] {
			t.Errorf("ConfigMap %s: digest --help lists no variable %s", cm.Name, k)
		}
		if strings.Contains(k, "PASSWORD") || strings.Contains(k, "TOKEN") || k == "DIGEST_HMAC_KEYS" {
			t.Errorf("ConfigMap %s: secret %s belongs in the Secret, as a file", cm.Name, k)
		}
	}
	for n, p := range m.podTemplates() {
		c := p.Spec.Containers[0]
		if len(c.EnvFrom) != 1 || c.EnvFrom[0].ConfigMapRef == nil || c.EnvFrom[0].ConfigMapRef.Name != cm.Name {
			t.Errorf("%s: envFrom %+v; want the ConfigMap %s", n, c.EnvFrom, cm.Name)
		}
		// Mounted file path -> the Secret's key in it.
		mounted := map[string]string{}
		for _, vm := range c.VolumeMounts {
			for _, v := range p.Spec.Volumes {
				if v.Name != vm.Name || v.Secret == nil {
					continue
				}
				if v.Secret.SecretName != secret.Name || !vm.ReadOnly {
					t.Errorf("%s: volume %s mounts Secret %q (read-only %v); want %q read-only", n, v.Name, v.Secret.SecretName, vm.ReadOnly, secret.Name)
				}
				if len(v.Secret.Items) == 0 {
					t.Errorf("%s: volume %s mounts every key of Secret %s; list the keys the pod needs (items)", n, v.Name, secret.Name)
				}
				for _, it := range v.Secret.Items {
					if _, ok := secret.StringData[it.Key]; !ok {
						t.Errorf("%s: volume %s mounts %s, not a key of Secret %s", n, v.Name, it.Key, secret.Name)
					}
					mounted[filepath.Join(vm.MountPath, it.Path)] = it.Key
				}
			}
		}
		used := map[string]bool{}
		files := map[string]bool{}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				t.Errorf("%s: %s from a Secret as a variable; mount it as a file", n, e.Name)
			}
			if strings.HasPrefix(e.Name, "DIGEST_") && !help.env[e.Name] {
				t.Errorf("%s: digest --help lists no variable %s", n, e.Name)
			}
			if !strings.HasSuffix(e.Name, "FILE") {
				continue
			}
			files[e.Name] = true
			key, ok := mounted[filepath.Clean(e.Value)]
			if !ok {
				t.Errorf("%s: %s=%s is not a mounted key of Secret %s", n, e.Name, e.Value, secret.Name)
			}
			used[key] = true
		}
		cmd := c.Args[0]
		want, ok := secretFiles[cmd]
		if !ok {
			t.Errorf("%s: no secrets listed for digest %s", n, cmd)
		}
		for _, f := range want {
			if !files[f] {
				t.Errorf("%s: digest %s needs %s", n, cmd, f)
			}
		}
		for f := range files {
			if !slices.Contains(want, f) {
				t.Errorf("%s: digest %s does not need %s", n, cmd, f)
			}
		}
		for path, key := range mounted {
			if !used[key] {
				t.Errorf("%s: mounts %s at %s, which no variable names: only the secrets a pod needs", n, key, path)
			}
			if (key == ownerKey) != ownerCommands[cmd] {
				t.Errorf("%s: digest %s mounts %s; the owner role's password is for migrate and prune alone", n, cmd, key)
			}
		}
	}
}

// ownerCommands connect as the owner role: migrate creates and alters the
// ledger tables, prune drops settled weeks' partitions and makes the coming
// weeks' (docs/security.md).
var ownerCommands = map[string]bool{"migrate": true, "prune": true}

// TestMigrateRunsAsTheOwner: the migrate Job and the prune CronJob connect
// to the ConfigMap's database as the owner role (docs/security.md), the
// others as the job role; the Secret's pgpass lines match.
func TestMigrateRunsAsTheOwner(t *testing.T) {
	t.Parallel()
	m := loadManifests(t)
	cm, secret := m.configMap(t), exampleSecret(t)
	jobURL, err := url.Parse(cm.Data["DIGEST_DATABASE_URL"])
	if err != nil {
		t.Fatal(err)
	}
	if jobURL.User.Username() != "digest_job" {
		t.Errorf("ConfigMap DIGEST_DATABASE_URL user %q; want the job role digest_job", jobURL.User.Username())
	}
	found := false
	for n, p := range m.podTemplates() {
		c := p.Spec.Containers[0]
		if !ownerCommands[c.Args[0]] {
			continue
		}
		found = found || c.Args[0] == "migrate"
		var own *url.URL
		for _, e := range c.Env {
			if e.Name == "DIGEST_DATABASE_URL" {
				if own, err = url.Parse(e.Value); err != nil {
					t.Fatal(err)
				}
			}
		}
		if own == nil || own.User.Username() != "digest_owner" || own.Host != jobURL.Host || own.Path != jobURL.Path || own.RawQuery != jobURL.RawQuery {
			t.Errorf("%s: DIGEST_DATABASE_URL %v; want the ConfigMap's database as digest_owner", n, own)
		}
	}
	if !found {
		t.Fatal("no migrate Job")
	}
	for key, user := range map[string]string{"pgpass": "digest_job", ownerKey: "digest_owner"} {
		f := strings.Split(secret.StringData[key], ":")
		if len(f) != 5 || f[3] != user || f[0]+":"+f[1] != jobURL.Host {
			t.Errorf("Secret %s: %q; want %s:*:%s:password", key, secret.StringData[key], jobURL.Host, user)
		}
	}
}

// TestGoMemoryLimitUnderTheContainerLimit: GOMEMLIMIT makes the GC work
// harder before the kernel's OOM killer ends the pod.
func TestGoMemoryLimitUnderTheContainerLimit(t *testing.T) {
	t.Parallel()
	forEachBuild(t, func(t *testing.T, m *manifests) {
		units := map[string]int64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
		for n, p := range m.podTemplates() {
			c := p.Spec.Containers[0]
			limit := c.Resources.Limits.Memory().Value()
			var set string
			for _, e := range c.Env {
				if e.Name == "GOMEMLIMIT" {
					set = e.Value
				}
			}
			mm := regexp.MustCompile(`^(\d+)(B|KiB|MiB|GiB)$`).FindStringSubmatch(set)
			if mm == nil {
				t.Errorf("%s: GOMEMLIMIT %q; want a size such as 200MiB", n, set)
				continue
			}
			v, _ := strconv.ParseInt(mm[1], 10, 64)
			v *= units[mm[2]]
			if limit == 0 || v >= limit*9/10 || v < limit/2 {
				t.Errorf("%s: GOMEMLIMIT %s = %d bytes; want 50-90%% of the memory limit %d", n, set, v, limit)
			}
		}
	})
}

func TestArgsAreRealCommandsAndFlags(t *testing.T) {
	t.Parallel()
	forEachBuild(t, func(t *testing.T, m *manifests) {
		help := helpOf(t)
		for n, p := range m.podTemplates() {
			c := p.Spec.Containers[0]
			if len(c.Command) > 0 {
				t.Errorf("%s: command %q overrides the image's entrypoint; pass args only", n, c.Command)
			}
			help.checkArgs(t, n, c.Args)
		}
	})
}

// TestStrictDecodingRejectsUnknownFields guards the guard: a misspelt
// field must fail to decode.
func TestStrictDecodingRejectsUnknownFields(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(manifestDir, "cronjob.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Replace(b, []byte("concurrencyPolicy:"), []byte("concurencyPolicy:"), 1)
	if err := decodeStrict(bad, &batchv1.CronJob{}); err == nil {
		t.Error("a misspelt field decoded without error")
	}
	if err := decodeStrict(b, &batchv1.CronJob{}); err != nil {
		t.Fatal(err)
	}
}
