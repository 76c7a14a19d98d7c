package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// releaseCommitTime is the commit time of the test's copies of the
// repository: the same content and the same time give the same commit.
const releaseCommitTime = "2026-12-01T10:00:00Z"

// repoCopy copies the repository as it is now (tracked files and untracked
// ones git does not ignore, with their changes) into a new directory under
// dir and commits it there as one commit, so that scripts/release sees a
// clean tree and Go records a commit. It returns the copy's path and the
// commit.
func repoCopy(t *testing.T, dir string) (string, string) {
	t.Helper()
	ls := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	ls.Dir = repoRoot
	out, err := ls.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dst := filepath.Join(dir, "digest")
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(repoRoot, f)
		st, err := os.Lstat(src)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the work tree
		}
		if err != nil || !st.Mode().IsRegular() {
			t.Fatalf("%s: %v (mode %v)", f, err, st.Mode())
		}
		if err := copyFile(src, filepath.Join(dst, f)); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dst, f), st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	gitIn(t, dst, "init", "-q")
	return dst, commitAll(t, dst, "release test")
}

// commitAll commits every change in the repository at dir, at
// releaseCommitTime, and returns the commit.
func commitAll(t *testing.T, dir, msg string) string {
	t.Helper()
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-q", "--no-gpg-sign", "-m", msg)
	return strings.TrimSpace(gitIn(t, dir, "rev-parse", "HEAD"))
}

// gitIn runs git with args in dir and returns its standard output.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=release test", "GIT_AUTHOR_EMAIL=release@example.com",
		"GIT_COMMITTER_NAME=release test", "GIT_COMMITTER_EMAIL=release@example.com",
		"GIT_AUTHOR_DATE="+releaseCommitTime, "GIT_COMMITTER_DATE="+releaseCommitTime)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return string(out)
}

// release runs scripts/release in repo with args; it returns the exit
// code, stdout and stderr.
func release(t *testing.T, repo string, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(repo, "scripts", "release"), args...)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errb.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errb.String()
	}
	t.Fatalf("scripts/release: %v", err)
	return -1, "", ""
}

// TestReleaseScriptPassesShellcheck: scripts/test installs shellcheck
// (Debian's package) when it is missing.
func TestReleaseScriptPassesShellcheck(t *testing.T) {
	t.Parallel()
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Fatalf("shellcheck not found (%v): scripts/test installs it", err)
	}
	if out, err := exec.Command(sc, "--severity=style", filepath.Join(repoRoot, "scripts", "release")).CombinedOutput(); err != nil {
		t.Errorf("shellcheck scripts/release: %v\n%s", err, out)
	}
}

// TestReleaseRefuses: a version that is not semantic, a dirty tree and a
// version the changelog does not describe are refused with exit 2 before
// anything is built.
func TestReleaseRefuses(t *testing.T) {
	t.Parallel()
	repo, _ := repoCopy(t, t.TempDir())
	for _, v := range []string{"1.2.3", "v1.2", "v01.2.3", "v1.2.3-", "latest", "v1.2.3 ", "v1.2.3-rc.1+"} {
		code, _, errOut := release(t, repo, nil, "--dry-run", v)
		if code != 2 || !strings.Contains(errOut, "not semantic") {
			t.Errorf("release %q: exit %d, %q; want 2, not semantic", v, code, errOut)
		}
	}
	code, _, errOut := release(t, repo, nil, "--dry-run", "v9.9.9")
	if code != 2 || !strings.Contains(errOut, "CHANGELOG.md has no section") {
		t.Errorf("release v9.9.9 (not in the changelog): exit %d, %q", code, errOut)
	}
	if code, _, _ := release(t, repo, nil); code != 2 {
		t.Errorf("release without a version: exit %d; want 2", code)
	}
	if err := os.WriteFile(filepath.Join(repo, "untracked.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = release(t, repo, nil, "--dry-run", deployedTag(t))
	if code != 2 || !strings.Contains(errOut, "uncommitted or untracked") || !strings.Contains(errOut, "untracked.txt") {
		t.Errorf("release from a dirty tree: exit %d, %q", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(repo, "dist")); !os.IsNotExist(err) {
		t.Errorf("a refused release left dist/: %v", err)
	}
}

// TestReleaseSetsTheImageTag: a release of a version the manifests do
// not deploy sets the base's image tag to it and stops (exit 2, nothing
// built) for the change to be committed; from that commit it goes ahead,
// and every overlay deploys the version it stamps. The dry run changes
// nothing and refuses too.
func TestReleaseSetsTheImageTag(t *testing.T) {
	t.Parallel()
	repo, _ := repoCopy(t, t.TempDir())
	const next = "v9.8.7-rc.1"
	old := deployedTag(t)
	changelog := filepath.Join(repo, "CHANGELOG.md")
	b, err := os.ReadFile(changelog)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte("## [Unreleased]\n"), []byte("## [Unreleased]\n\n## [9.8.7-rc.1] - 2026-12-09\n\n- The release test's.\n"), 1)
	if err := os.WriteFile(changelog, b, 0o644); err != nil {
		t.Fatal(err)
	}
	commitAll(t, repo, "changelog "+next)
	kpath := filepath.Join(repo, "deploy", manifestDir, "kustomization.yaml")
	before, err := os.ReadFile(kpath)
	if err != nil {
		t.Fatal(err)
	}

	code, _, errOut := release(t, repo, nil, "--dry-run", next)
	if after, _ := os.ReadFile(kpath); code != 2 || !strings.Contains(errOut, "deploys "+old+", not "+next) || !bytes.Equal(after, before) {
		t.Errorf("release --dry-run %s with the manifests at %s: exit %d, %q, kustomization changed %v; want 2, unchanged", next, old, code, errOut, !bytes.Equal(after, before))
	}
	code, out, errOut := release(t, repo, nil, next)
	if code != 2 || !strings.Contains(errOut, "from "+old+" to "+next) || !strings.Contains(errOut, "commit it") || out != "" {
		t.Fatalf("release %s with the manifests at %s: exit %d, %q %q; want 2, the tag set, to be committed", next, old, code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(repo, "dist")); !os.IsNotExist(err) {
		t.Errorf("the release that set the tag built: %v", err)
	}
	if st := gitIn(t, repo, "status", "--porcelain"); strings.TrimSpace(st) != "M deploy/"+manifestDir+"/kustomization.yaml" {
		t.Errorf("git status after the tag was set: %q; want the base kustomization alone", st)
	}
	for _, o := range overlays {
		m := kustomizeBuild(t, filepath.Join(repo, "deploy", overlayDir, o))
		for n, p := range m.podTemplates() {
			if img := p.Spec.Containers[0].Image; img != imageName+":"+next {
				t.Errorf("%s: %s runs %s after the release set %s", o, n, img, next)
			}
		}
	}
	commitAll(t, repo, "deploy "+next)
	code, out, errOut = release(t, repo, nil, "--dry-run", next)
	// printf %q escapes the spaces of the ldflags.
	if code != 0 || !strings.Contains(strings.ReplaceAll(out, `\ `, " "), "main.version="+next+" ") {
		t.Errorf("release --dry-run %s from the commit that deploys it: exit %d, %q %q; want 0, stamping %s", next, code, out, errOut, next)
	}
	// An image tag holds no "+": a version with build metadata is refused.
	code, _, errOut = release(t, repo, nil, "--dry-run", "v9.8.7-rc.1+b5")
	if code != 2 || !strings.Contains(errOut, "build metadata") {
		t.Errorf("release v9.8.7-rc.1+b5: exit %d, %q; want 2, build metadata", code, errOut)
	}
}

// TestReleaseDryRun: the dry run builds nothing and prints one static,
// reproducible go build per platform, with the ldflags of "make build"
// for the same version, commit and time.
func TestReleaseDryRun(t *testing.T) {
	t.Parallel()
	releaseVersion := deployedTag(t)
	repo, sha := repoCopy(t, t.TempDir())
	code, out, errOut := release(t, repo, nil, "--dry-run", releaseVersion)
	if code != 0 {
		t.Fatalf("release --dry-run: exit %d\n%s", code, errOut)
	}
	mk := exec.Command("make", "-s", "-n", "build", "VERSION="+releaseVersion, "COMMIT="+sha, "BUILD_TIME="+releaseCommitTime)
	mk.Dir = repo
	makeOut, err := mk.Output()
	if err != nil {
		t.Fatalf("make -n build: %v", err)
	}
	_, ldflags, _ := strings.Cut(string(makeOut), "-ldflags '")
	ldflags, _, _ = strings.Cut(ldflags, "'")
	if !strings.Contains(ldflags, "main.commit="+sha) || !strings.Contains(ldflags, "main.buildTime="+releaseCommitTime) {
		t.Fatalf("make build's ldflags %q: want the commit and its time", ldflags)
	}
	var builds []string
	for l := range strings.Lines(out) {
		if strings.Contains(l, " go build ") {
			builds = append(builds, l)
		}
	}
	for _, p := range []string{"amd64", "arm64"} {
		i := slices.IndexFunc(builds, func(l string) bool { return strings.Contains(l, "GOARCH="+p+" ") })
		if i < 0 {
			t.Errorf("release --dry-run builds no linux/%s:\n%s", p, out)
			continue
		}
		b := builds[i]
		for _, want := range []string{"CGO_ENABLED=0", "GOOS=linux", " -trimpath ", " -buildvcs=true ", "/dist/digest-" + releaseVersion + "-linux-" + p + " ", "./cmd/digest"} {
			if !strings.Contains(b, want) {
				t.Errorf("release --dry-run, linux/%s: %q lacks %q", p, b, want)
			}
		}
		// printf %q escapes the spaces of the ldflags.
		if !strings.Contains(strings.ReplaceAll(b, `\ `, " "), ldflags) {
			t.Errorf("release --dry-run, linux/%s: %q; want make build's ldflags %q", p, b, ldflags)
		}
	}
	if len(builds) != 2 || !strings.Contains(out, "SHA256SUMS") {
		t.Errorf("release --dry-run printed %d builds:\n%s", len(builds), out)
	}
	if _, err := os.Stat(filepath.Join(repo, "dist")); !os.IsNotExist(err) {
		t.Errorf("the dry run made dist/: %v", err)
	}
}

// TestReleaseIsReproducible builds the release (linux/amd64 alone: the
// arm64 build is the same command, checked by the dry run) from two
// checkouts of one commit at different paths: the binaries are the same bytes,
// SHA256SUMS checks them, and the binary reports the version, the commit,
// its time and no modification, both stamped and as Go recorded them.
func TestReleaseIsReproducible(t *testing.T) {
	t.Parallel()
	releaseVersion := deployedTag(t)
	var sums [2]string
	var bin string
	// The tree copied once, then cloned to a second path: the same commit.
	first, sha := repoCopy(t, t.TempDir())
	second := filepath.Join(t.TempDir(), "elsewhere", "digest")
	if out, err := exec.Command("git", "clone", "-q", first, second).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	for i, repo := range []string{first, second} {
		out := filepath.Join(t.TempDir(), "out dir")
		code, stdout, errOut := release(t, repo, []string{"RELEASE_PLATFORMS=linux/amd64"}, "--out", out, releaseVersion)
		if code != 0 {
			t.Fatalf("release: exit %d\n%s", code, errOut)
		}
		b, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		sums[i] = string(b)
		if stdout != sums[i] {
			t.Errorf("release printed %q; want SHA256SUMS %q", stdout, sums[i])
		}
		check := exec.Command("sha256sum", "-c", "SHA256SUMS")
		check.Dir = out
		if o, err := check.CombinedOutput(); err != nil {
			t.Errorf("sha256sum -c: %v\n%s", err, o)
		}
		bin = filepath.Join(out, "digest-"+releaseVersion+"-linux-amd64")
	}
	if sums[0] != sums[1] {
		t.Errorf("the same commit built at two paths differs:\n%s\n%s", sums[0], sums[1])
	}
	if f := strings.Fields(sums[0]); len(f) != 2 || f[1] != "digest-"+releaseVersion+"-linux-amd64" {
		t.Errorf("SHA256SUMS %q: want one line for the amd64 binary", sums[0])
	}
	v := binaryVersion(t, bin)
	if v.Version != releaseVersion || v.Commit != sha || v.BuildTime != releaseCommitTime || v.Modified {
		t.Errorf("the release binary's version %+v; want %s, commit %s of %s, not modified", v, releaseVersion, sha, releaseCommitTime)
	}
	info, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"vcs.revision=" + sha, "vcs.modified=false", "-trimpath=true", "CGO_ENABLED=0"} {
		if !strings.Contains(string(info), want) {
			t.Errorf("go version -m: no %s\n%s", want, info)
		}
	}
}

// TestPlainGoBuildReportsItsCommit: a binary built by a plain "go build"
// (no ldflags) in a git checkout reports Go's module version for the
// commit, the commit and its time, not "dev".
func TestPlainGoBuildReportsItsCommit(t *testing.T) {
	t.Parallel()
	repo, sha := repoCopy(t, t.TempDir())
	bin := filepath.Join(t.TempDir(), "digest")
	build := exec.Command("go", "build", "-buildvcs=true", "-trimpath", "-o", bin, "./cmd/digest")
	build.Dir = repo
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	v := binaryVersion(t, bin)
	// Go's pseudo-version of an untagged commit: v0.0.0-TIME-COMMIT12.
	if want := "v0.0.0-20261201100000-" + sha[:12]; v.Version != want || v.Commit != sha || v.BuildTime != releaseCommitTime {
		t.Errorf("go build's digest version --json = %+v; want %s, commit %s, %s", v, want, sha, releaseCommitTime)
	}
}

// builtVersion is what "digest version --json" says of a binary's build.
type builtVersion struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Modified  bool   `json:"modified"`
	BuildTime string `json:"build_time"`
}

// binaryVersion runs "bin version --json".
func binaryVersion(t *testing.T, bin string) builtVersion {
	t.Helper()
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("%s version --json: %v", bin, err)
	}
	var v builtVersion
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%s version --json: %v\n%s", bin, err, out)
	}
	return v
}
