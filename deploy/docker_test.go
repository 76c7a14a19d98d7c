package deploy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// repoRoot is the job's module, the Docker build context.
const repoRoot = ".."

// The build arguments of the test build: what "digest version" must print.
const (
	stampedVersion = "v0.0.0-dockerfile-test"
	stampedCommit  = "0123456789abcdef0123456789abcdef01234567"
	stampedTime    = "2026-12-01T10:00:00Z"
)

// buildArgs are the Dockerfile's build arguments, the Makefile's
// variables of the same names.
var buildArgs = map[string]string{"VERSION": stampedVersion, "COMMIT": stampedCommit, "BUILD_TIME": stampedTime}

// digestBin is the binary built the way the Dockerfile builds it, in
// TestMain; the manifest tests read its --help.
var digestBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "digest-docker-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	digestBin, err = dockerBuild(dir, buildArgs)
	if err != nil {
		fmt.Fprintf(os.Stderr, "building as the Dockerfile does: %v\n", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// instruction is one Dockerfile line: the keyword and the rest.
type instruction struct {
	stage int // 0 for the first FROM's stage
	cmd   string
	args  string
}

// dockerfile holds the Dockerfile's instructions (continuation lines joined).
type dockerfile []instruction

func parseDockerfile(p string) (dockerfile, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out dockerfile
	stage, line := -1, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if line == "" && (l == "" || strings.HasPrefix(l, "#")) {
			continue
		}
		if rest, ok := strings.CutSuffix(l, `\`); ok {
			line += rest + " "
			continue
		}
		line += l
		cmd, args, _ := strings.Cut(line, " ")
		cmd = strings.ToUpper(cmd)
		if cmd == "FROM" {
			stage++
		}
		out = append(out, instruction{stage: stage, cmd: cmd, args: strings.TrimSpace(args)})
		line = ""
	}
	return out, sc.Err()
}

// find returns the instructions named cmd in stage (-1: the last stage).
func (d dockerfile) find(stage int, cmd string) []instruction {
	if stage < 0 {
		stage = d[len(d)-1].stage
	}
	var out []instruction
	for _, in := range d {
		if in.stage == stage && in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// dockerBuild does what the Dockerfile's build stage does, in dir: copies
// the COPY sources (less .dockerignore) from the repository, runs each RUN
// line with the ARG values (args override their defaults) in the
// environment, and returns the path of the file the final stage copies
// from the build stage.
func dockerBuild(dir string, args map[string]string) (string, error) {
	d, err := parseDockerfile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		return "", err
	}
	ignore, err := readDockerignore(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		return "", err
	}
	workdir := "/"
	env := os.Environ()
	for _, in := range d {
		if in.stage != 0 {
			continue
		}
		switch in.cmd {
		case "WORKDIR":
			workdir = in.args
		case "ARG":
			name, def, _ := strings.Cut(in.args, "=")
			if v, ok := args[name]; ok {
				def = v
			}
			env = append(env, name+"="+def)
		case "COPY":
			f := strings.Fields(in.args)
			dst := f[len(f)-1]
			intoDir := strings.HasSuffix(dst, "/") || dst == "."
			for _, src := range f[:len(f)-1] {
				if err := copyContext(src, filepath.Join(dir, dst), intoDir, ignore); err != nil {
					return "", fmt.Errorf("COPY %s: %w", in.args, err)
				}
			}
		case "RUN":
			cmd := exec.Command("sh", "-c", in.args)
			cmd.Dir, cmd.Env = dir, env
			if out, err := cmd.CombinedOutput(); err != nil {
				return "", fmt.Errorf("RUN %s: %v\n%s", in.args, err, out)
			}
		}
	}
	for _, in := range d.find(-1, "COPY") {
		f := strings.Fields(in.args)
		if !strings.HasPrefix(f[0], "--from=") {
			continue
		}
		rel, ok := strings.CutPrefix(f[1], strings.TrimSuffix(workdir, "/")+"/")
		if !ok {
			return "", fmt.Errorf("COPY %s: the source is not under WORKDIR %s", in.args, workdir)
		}
		bin := filepath.Join(dir, rel)
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("COPY %s: %w", in.args, err)
		}
		return bin, nil
	}
	return "", fmt.Errorf("the final stage copies nothing from the build stage")
}

// readDockerignore reads the patterns of a .dockerignore. Supported: path
// globs relative to the context, and "**/" followed by a glob matched
// against any path's base name; no "!" exceptions.
func readDockerignore(p string) ([]string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var pats []string
	for l := range strings.Lines(string(b)) {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasPrefix(l, "!") {
			return nil, fmt.Errorf(".dockerignore: exceptions (%s) are not supported by this test", l)
		}
		pats = append(pats, strings.TrimPrefix(path.Clean(l), "/"))
	}
	return pats, nil
}

func ignored(rel string, pats []string) bool {
	for _, p := range pats {
		if base, ok := strings.CutPrefix(p, "**/"); ok {
			if m, _ := path.Match(base, path.Base(rel)); m {
				return true
			}
			continue
		}
		// A pattern matches the path or any of its parent directories.
		for q := rel; q != "." && q != "/"; q = path.Dir(q) {
			if m, _ := path.Match(p, q); m {
				return true
			}
		}
	}
	return false
}

// copyContext copies src (relative to the repository) to dst as COPY
// does: a directory's contents into dst, a file to dst, or into it when
// intoDir (the destination ended in "/").
func copyContext(src, dst string, intoDir bool, ignore []string) error {
	root := filepath.Join(repoRoot, src)
	st, err := os.Stat(root)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		if intoDir {
			dst = filepath.Join(dst, filepath.Base(src))
		}
		return copyFile(root, dst)
	}
	return filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(repoRoot, p)
		if err != nil {
			return err
		}
		if ignored(filepath.ToSlash(rel), ignore) {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if e.IsDir() {
			return nil
		}
		inner, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		return copyFile(p, filepath.Join(dst, inner))
	})
}

func copyFile(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// TestDockerfileBuildStampsVersion: the image's binary reports the build
// arguments as its version, commit and build time.
func TestDockerfileBuildStampsVersion(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(digestBin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(out)), "digest "+stampedVersion+" (commit "+stampedCommit[:12]+"; built "+stampedTime+";"; !strings.HasPrefix(got, want) {
		t.Errorf("digest version = %q, want it to start %q", got, want)
	}
	v := binaryVersion(t, digestBin)
	if v.Version != stampedVersion || v.Commit != stampedCommit || v.BuildTime != stampedTime {
		t.Errorf("digest version --json = %+v; want the build arguments %v", v, buildArgs)
	}
}

// TestDockerfileBuildMatchesMakefile keeps one set of build flags: the
// Dockerfile's go build and "make build" must be the same command.
func TestDockerfileBuildMatchesMakefile(t *testing.T) {
	t.Parallel()
	d, err := parseDockerfile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var build string
	for _, in := range d.find(0, "RUN") {
		if strings.Contains(in.args, "go build") {
			build = in.args
		}
	}
	if build == "" {
		t.Fatal("the build stage has no RUN ... go build")
	}
	docker := commandFields(os.Expand(build, func(v string) string {
		if _, ok := buildArgs[v]; ok {
			return "[" + v + "]"
		}
		return "$" + v
	}))
	makeArgs := []string{"-s", "-n", "build"}
	for k := range buildArgs {
		makeArgs = append(makeArgs, k+"=["+k+"]")
	}
	cmd := exec.Command("make", makeArgs...)
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make -n build: %v", err)
	}
	makeCmd := commandFields(string(out))
	if strings.Join(docker, "\x00") != strings.Join(makeCmd, "\x00") {
		t.Errorf("Dockerfile and Makefile build differently:\n  Dockerfile: %q\n  make build: %q", docker, makeCmd)
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath"} {
		if !strings.Contains(build, want) {
			t.Errorf("the Dockerfile's build lacks %s", want)
		}
	}
}

func TestDockerfileRuntimeStage(t *testing.T) {
	t.Parallel()
	d, err := parseDockerfile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var goVersion string
	for l := range strings.Lines(string(gomod)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "go "); ok {
			goVersion = strings.Join(strings.SplitN(v, ".", 3)[:2], ".")
		}
	}
	// Both base images by tag and digest: the tag for the reader, the
	// digest for what is pulled.
	pinned := regexp.MustCompile(`^(\S+:\S+)@(sha256:[0-9a-f]{64})(?: AS \w+)?$`)
	build := pinned.FindStringSubmatch(d.find(0, "FROM")[0].args)
	if build == nil || build[1] != "golang:"+goVersion {
		t.Errorf("build stage FROM %s: want golang:%s (go.mod) pinned by @sha256 digest", d.find(0, "FROM")[0].args, goVersion)
	}
	runtime := pinned.FindStringSubmatch(d.find(-1, "FROM")[0].args)
	if runtime == nil || runtime[1] != "gcr.io/distroless/static-debian12:nonroot" {
		t.Fatalf("runtime FROM %s: want distroless static, nonroot, pinned by @sha256 digest", d.find(-1, "FROM")[0].args)
	}
	// OCI labels: what the image is, where it comes from, which version,
	// and the base it was built on (the FROM line's own digest).
	labels := map[string]string{}
	for _, in := range d.find(-1, "LABEL") {
		for _, m := range regexp.MustCompile(`([a-z0-9.]+)="([^"]*)"`).FindAllStringSubmatch(in.args, -1) {
			labels[m[1]] = m[2]
		}
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.title":       "digest",
		"org.opencontainers.image.version":     "${VERSION}",
		"org.opencontainers.image.revision":    "${COMMIT}",
		"org.opencontainers.image.created":     "${BUILD_TIME}",
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.base.name":   runtime[1],
		"org.opencontainers.image.base.digest": runtime[2],
	} {
		if labels[k] != want {
			t.Errorf("runtime LABEL %s=%q; want %q", k, labels[k], want)
		}
	}
	if !strings.HasPrefix(labels["org.opencontainers.image.source"], "https://") {
		t.Errorf("runtime LABEL org.opencontainers.image.source=%q; want the repository's URL", labels["org.opencontainers.image.source"])
	}
	var runtimeArgs []string
	for _, a := range d.find(-1, "ARG") {
		name, _, _ := strings.Cut(a.args, "=")
		runtimeArgs = append(runtimeArgs, name)
	}
	if slices.Sort(runtimeArgs); !slices.Equal(runtimeArgs, slices.Sorted(maps.Keys(buildArgs))) {
		t.Errorf("runtime ARG %v: the labels need the build arguments %v in the runtime stage", runtimeArgs, slices.Sorted(maps.Keys(buildArgs)))
	}
	users := d.find(-1, "USER")
	if len(users) != 1 || strings.HasPrefix(users[0].args, "0") || strings.HasPrefix(users[0].args, "root") {
		t.Errorf("runtime USER %v: want one non-root user", users)
	}
	var entry []string
	if e := d.find(-1, "ENTRYPOINT"); len(e) != 1 || json.Unmarshal([]byte(e[0].args), &entry) != nil {
		t.Fatalf("ENTRYPOINT %v: want one, in exec form", e)
	}
	// On the image's PATH: distroless sets /usr/local/bin first.
	copied := false
	for _, in := range d.find(-1, "COPY") {
		if f := strings.Fields(in.args); len(f) == 3 && strings.HasPrefix(f[0], "--from=") && f[2] == "/usr/local/bin/"+entry[0] {
			copied = true
		}
	}
	if len(entry) != 1 || entry[0] != "digest" || !copied {
		t.Errorf("ENTRYPOINT %q: want [\"digest\"], the binary copied to /usr/local/bin/digest", entry)
	}
}

// commandFields splits a command line into fields with its quote
// characters dropped: the same command quoted with ' (Makefile) or "
// (Dockerfile) gives the same fields.
func commandFields(s string) []string {
	return strings.Fields(strings.NewReplacer(`"`, "", "'", "").Replace(s))
}
