package e2etest

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binary is the digest command built by Main, once per test binary.
var binary string

// Main builds the digest binary into a temporary directory, runs the
// package's tests and exits. Call it from TestMain:
//
//	func TestMain(m *testing.M) { e2etest.Main(m) }
//
// Under go test -short (make check) it builds nothing and runs no test:
// every end-to-end test drives the real binary against real services.
func Main(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e: skipped under -short (make check); make test runs it")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "digest-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "digest")
	build := exec.Command("go", "build", "-o", binary, "./cmd/digest")
	build.Dir = RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build digest: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// Binary returns the path of the binary Main built.
func Binary() string {
	if binary == "" {
		panic("e2etest: Binary called without e2etest.Main in TestMain")
	}
	return binary
}

// RepoRoot returns the repository root: the nearest directory at or above
// the working directory (a test's is its package's) that holds go.mod.
// Not the source file's path from runtime.Caller, which -trimpath (the
// test suite's GOFLAGS, see scripts/test) makes relative to the module.
func RepoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		panic(fmt.Sprintf("e2etest: %v", err))
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			panic("e2etest: no go.mod at or above " + dir)
		}
	}
}
