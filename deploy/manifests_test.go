package deploy

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const (
	manifestDir = "kubernetes"
	// weekPlaceholder is the one parameter of the backfill and sharded Job
	// templates.
	weekPlaceholder = "__WEEK__"
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
	m := &manifests{cronJobs: map[string]*batchv1.CronJob{}, jobs: map[string]*batchv1.Job{},
		configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}, accounts: map[string]*corev1.ServiceAccount{}}
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
		docs := bytes.Split(b, []byte("\n---"))
		if len(docs) != 1 {
			t.Errorf("%s: %d documents; want one object per file", name, len(docs))
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(docs[0], &tm); err != nil {
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
		default:
			t.Fatalf("%s: unexpected %s %s", name, tm.APIVersion, tm.Kind)
		}
		if err := decodeStrict(docs[0], obj); err != nil {
			t.Fatalf("%s: strict decoding: %v", name, err)
		}
	}
	return m
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

func (m *manifests) secret(t *testing.T) *corev1.Secret {
	t.Helper()
	if len(m.secrets) != 1 {
		t.Fatalf("%d Secrets; want one example", len(m.secrets))
	}
	for _, s := range m.secrets {
		return s
	}
	return nil
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
	b, err := os.ReadFile(filepath.Join(manifestDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The fields this kustomization uses, strictly: a misspelt one fails.
	var k struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Namespace  string `json:"namespace"`
		Labels     []struct {
			Pairs            map[string]string `json:"pairs"`
			IncludeSelectors bool              `json:"includeSelectors"`
		} `json:"labels"`
		Resources []string `json:"resources"`
	}
	if err := decodeStrict(b, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.Kind != "Kustomization" || len(k.Resources) == 0 {
		t.Fatalf("kustomization.yaml: kind %q with %d resources", k.Kind, len(k.Resources))
	}
	m := loadManifests(t)
	for _, r := range k.Resources {
		if _, err := os.Stat(filepath.Join(manifestDir, r)); err != nil {
			t.Errorf("kustomization resource %s: %v", r, err)
		}
		if _, ok := m.secrets[r]; ok {
			t.Errorf("kustomization applies the example Secret %s", r)
		}
	}
	if !slices.Contains(k.Resources, "cronjob.yaml") || !slices.Contains(k.Resources, "configmap.yaml") {
		t.Errorf("kustomization resources %v: want the CronJob and its ConfigMap", k.Resources)
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
	m := loadManifests(t)
	for n, s := range m.jobSpecs() {
		if s.BackoffLimit == nil && s.BackoffLimitPerIndex == nil {
			t.Errorf("%s: no backoffLimit", n)
		}
		if s.TTLSecondsAfterFinished == nil || *s.TTLSecondsAfterFinished <= 0 {
			t.Errorf("%s: no ttlSecondsAfterFinished", n)
		}
		c := s.Template.Spec.Containers[0]
		// The run ends by itself at --deadline (exit 3), stops within
		// --grace, and pushes its metrics, before Kubernetes kills it.
		need := durationFlag(t, n, c.Args, "deadline", 30*time.Minute) + durationFlag(t, n, c.Args, "grace", defaultGrace) + pushTimeout
		if c.Args[0] != "run" {
			need = 0
		}
		if s.ActiveDeadlineSeconds == nil || time.Duration(*s.ActiveDeadlineSeconds)*time.Second <= need {
			t.Errorf("%s: activeDeadlineSeconds %v; want more than %s", n, s.ActiveDeadlineSeconds, need)
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
	m := loadManifests(t)
	images := map[string]bool{}
	for n, p := range m.podTemplates() {
		s := p.Spec
		if s.RestartPolicy != corev1.RestartPolicyNever {
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
}

// TestPodsUseConfigAndSecrets: settings come from the ConfigMap, secrets
// from files of the Secret named by *_FILE variables, and every DIGEST_
// variable is one digest reads.
func TestPodsUseConfigAndSecrets(t *testing.T) {
	t.Parallel()
	m := loadManifests(t)
	help := helpOf(t)
	cm, secret := m.configMap(t), m.secret(t)
	for k := range cm.Data {
		if strings.HasPrefix(k, "DIGEST_") && !help.env[k] {
			t.Errorf("ConfigMap %s: digest --help lists no variable %s", cm.Name, k)
		}
		if strings.Contains(k, "PASSWORD") || strings.Contains(k, "TOKEN") || k == "DIGEST_HMAC_KEYS" {
			t.Errorf("ConfigMap %s: secret %s belongs in the Secret, as a file", cm.Name, k)
		}
	}
	wantFiles := []string{"DIGEST_HMAC_KEYS_FILE", "DIGEST_SMTP_PASSWORD_FILE", "DIGEST_POSTMARK_TOKEN_FILE"}
	for n, p := range m.podTemplates() {
		c := p.Spec.Containers[0]
		if len(c.EnvFrom) != 1 || c.EnvFrom[0].ConfigMapRef == nil || c.EnvFrom[0].ConfigMapRef.Name != cm.Name {
			t.Errorf("%s: envFrom %+v; want the ConfigMap %s", n, c.EnvFrom, cm.Name)
		}
		// Secret volume mount paths -> the Secret's keys under them.
		mounts := map[string]bool{}
		for _, vm := range c.VolumeMounts {
			for _, v := range p.Spec.Volumes {
				if v.Name != vm.Name || v.Secret == nil {
					continue
				}
				if v.Secret.SecretName != secret.Name || !vm.ReadOnly {
					t.Errorf("%s: volume %s mounts Secret %q (read-only %v); want %q read-only", n, v.Name, v.Secret.SecretName, vm.ReadOnly, secret.Name)
				}
				mounts[vm.MountPath] = true
			}
		}
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
			dir, key := filepath.Split(e.Value)
			_, inSecret := secret.StringData[key]
			if !mounts[filepath.Clean(dir)] || !inSecret {
				t.Errorf("%s: %s=%s is not a key of Secret %s mounted at %s", n, e.Name, e.Value, secret.Name, dir)
			}
		}
		for _, f := range wantFiles {
			if !files[f] {
				t.Errorf("%s: %s is not set", n, f)
			}
		}
	}
}

func TestArgsAreRealCommandsAndFlags(t *testing.T) {
	t.Parallel()
	m := loadManifests(t)
	help := helpOf(t)
	for n, p := range m.podTemplates() {
		c := p.Spec.Containers[0]
		if len(c.Command) > 0 {
			t.Errorf("%s: command %q overrides the image's entrypoint; pass args only", n, c.Command)
		}
		help.checkArgs(t, n, c.Args)
	}
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
