package deploy

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestNamespaceInTheBase: the base creates the namespace its objects
// live in, with Pod Security "restricted" enforced, and every other
// object of every build (the templates created on their own too) is in
// it.
func TestNamespaceInTheBase(t *testing.T) {
	t.Parallel()
	k := loadKustomization(t)
	if k.Namespace == "" {
		t.Fatal("kustomization.yaml sets no namespace")
	}
	forEachBuild(t, func(t *testing.T, m *manifests) {
		if len(m.namespaces) != 1 {
			t.Fatalf("%d Namespaces; want the base's one", len(m.namespaces))
		}
		for n, ns := range m.namespaces {
			if ns.Name != k.Namespace || ns.Namespace != "" {
				t.Errorf("%s: Namespace %q (in %q); want %q, cluster-wide", n, ns.Name, ns.Namespace, k.Namespace)
			}
			if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "restricted" {
				t.Errorf("%s: pod-security.kubernetes.io/enforce %q; want restricted", n, got)
			}
		}
		for n, o := range m.objects {
			if _, ok := m.namespaces[n]; !ok && o.GetNamespace() != k.Namespace {
				t.Errorf("%s: in namespace %q; want %q", n, o.GetNamespace(), k.Namespace)
			}
		}
	})
}

// TestNoBuildHoldsASecret: the Secret is created from files, never by
// "kubectl apply -k": no build (the base's files, every overlay, the
// schedule component, the digest pin example) holds one, and the
// documented example holds placeholders alone.
func TestNoBuildHoldsASecret(t *testing.T) {
	t.Parallel()
	forEachBuild(t, func(t *testing.T, m *manifests) {
		for n := range m.secrets {
			t.Errorf("%s: a Secret in the build; create it from files (%s)", n, secretExample)
		}
	})
	if m := kustomizeBuild(t, filepath.Join("examples", "pin-by-digest")); len(m.secrets) != 0 {
		t.Errorf("examples/pin-by-digest builds %d Secrets", len(m.secrets))
	}
	for k, v := range exampleSecret(t).StringData {
		if !strings.Contains(v, "REPLACE") {
			t.Errorf("%s: key %s is %q; want a REPLACE placeholder, never a real value", secretExample, k, v)
		}
	}
}
