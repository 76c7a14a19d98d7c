package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// imageName is the image every pod runs, without tag or digest.
const imageName = "registry.example.com/digest"

// deployedTag is the image tag every overlay deploys: the newTag of the
// base's one images: entry, which scripts/release sets.
func deployedTag(t *testing.T) string {
	t.Helper()
	k := loadKustomization(t)
	if len(k.Images) != 1 || k.Images[0].Name != imageName || k.Images[0].NewTag == "" || k.Images[0].NewName != "" || k.Images[0].Digest != "" {
		t.Fatalf("%s/kustomization.yaml images %+v: want one entry for %s setting newTag alone (the release; a digest pin is an overlay's)", manifestDir, k.Images, imageName)
	}
	return k.Images[0].NewTag
}

// newestRelease is the version of CHANGELOG.md's newest release section,
// "## [X.Y.Z] - DATE", with the v of tags and of "digest version".
func newestRelease(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## \[([0-9]+\.[0-9]+\.[0-9]+[^\]]*)\]`).FindSubmatch(b)
	if m == nil {
		t.Fatal("CHANGELOG.md has no release section ## [X.Y.Z]")
	}
	return "v" + string(m[1])
}

// TestOneReleaseTag: every pod of every overlay (and of an overlay with
// the schedule component) runs the base's tag, no overlay sets a tag of
// its own, and the tag is the newest release of the changelog: the
// version scripts/release stamps into "digest version" (TestReleaseDryRun
// and TestReleaseIsReproducible build that version and read it back).
func TestOneReleaseTag(t *testing.T) {
	t.Parallel()
	tag := deployedTag(t)
	if want := newestRelease(t); tag != want {
		t.Errorf("the manifests deploy %s:%s; the newest release in CHANGELOG.md is %s: make release VERSION=%s sets the tag", imageName, tag, want, want)
	}
	for _, o := range overlays {
		var k kustomization
		decodeFile(t, filepath.Join(overlayDir, o, "kustomization.yaml"), &k)
		if len(k.Images) != 0 {
			t.Errorf("%s: images %+v; the tag is the base's alone (one release everywhere)", o, k.Images)
		}
	}
	want := imageName + ":" + tag
	forEachBuild(t, func(t *testing.T, m *manifests) {
		for n, p := range m.podTemplates() {
			if img := p.Spec.Containers[0].Image; img != want {
				t.Errorf("%s runs %s; want the release %s", n, img, want)
			}
		}
	})
}

// TestPinByDigestExample: the example overlay pins every pod of
// production by the image's digest, a well-formed sha256.
func TestPinByDigestExample(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("examples", "pin-by-digest")
	var k kustomization
	decodeFile(t, filepath.Join(dir, "kustomization.yaml"), &k)
	if len(k.Images) != 1 || k.Images[0].Name != imageName || !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(k.Images[0].Digest) || k.Images[0].NewTag != "" {
		t.Fatalf("%s: images %+v; want one entry for %s with digest: sha256:<64 hex> alone", dir, k.Images, imageName)
	}
	m := kustomizeBuild(t, dir)
	prod := kustomizeBuild(t, filepath.Join(overlayDir, "production"))
	want := imageName + "@" + k.Images[0].Digest
	for n, p := range m.podTemplates() {
		if img := p.Spec.Containers[0].Image; img != want {
			t.Errorf("%s: %s runs %s; want %s", dir, n, img, want)
		}
	}
	if len(m.podTemplates()) != len(prod.podTemplates()) {
		t.Errorf("%s: %d pod templates; want production's %d", dir, len(m.podTemplates()), len(prod.podTemplates()))
	}
}
