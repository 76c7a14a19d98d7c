package main

import (
	"encoding/json"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// goBuild is what Go records in a binary built by "go build" in a git
// checkout: the module's pseudo-version and the VCS stamp.
func goBuild(mainVersion string, modified bool) *debug.BuildInfo {
	return &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/weeklydigest/digest", Version: mainVersion},
		Settings: []debug.BuildSetting{
			{Key: "-trimpath", Value: "true"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "dc6c0e0b580ee76ed6c428928e89e03f4a17e47d"},
			{Key: "vcs.time", Value: "2026-12-02T02:03:53Z"},
			{Key: "vcs.modified", Value: strconv.FormatBool(modified)},
		},
	}
}

func TestVersionOfABuild(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                  string
		bi                    *debug.BuildInfo
		stamp                 [3]string // -X main.version, main.commit, main.buildTime
		version, commit, time string
		modified              bool
	}{
		{"stamped by ldflags (make build, Dockerfile, release)", goBuild("(devel)", false),
			[3]string{"v0.1.0", "0123456789abcdef0123456789abcdef01234567", "2026-12-01T10:00:00Z"},
			"v0.1.0", "0123456789abcdef0123456789abcdef01234567", "2026-12-01T10:00:00Z", false},
		{"stamped version only: the rest from the VCS stamp", goBuild("(devel)", false), [3]string{"v0.1.0", "", ""},
			"v0.1.0", "dc6c0e0b580ee76ed6c428928e89e03f4a17e47d", "2026-12-02T02:03:53Z", false},
		{"go build in a checkout: the pseudo-version", goBuild("v0.0.0-20261202020353-dc6c0e0b580e", false), [3]string{},
			"v0.0.0-20261202020353-dc6c0e0b580e", "dc6c0e0b580ee76ed6c428928e89e03f4a17e47d", "2026-12-02T02:03:53Z", false},
		{"go build of a tagged commit", goBuild("v0.1.0", false), [3]string{}, "v0.1.0", "dc6c0e0b580ee76ed6c428928e89e03f4a17e47d", "2026-12-02T02:03:53Z", false},
		{"go build with uncommitted changes: Go marks it +dirty once", goBuild("v0.0.0-20261202020353-dc6c0e0b580e+dirty", true), [3]string{},
			"v0.0.0-20261202020353-dc6c0e0b580e+dirty", "dc6c0e0b580ee76ed6c428928e89e03f4a17e47d", "2026-12-02T02:03:53Z", true},
		{"stamped, but the tree was modified", goBuild("(devel)", true), [3]string{"v0.1.0", "", ""},
			"v0.1.0+dirty", "dc6c0e0b580ee76ed6c428928e89e03f4a17e47d", "2026-12-02T02:03:53Z", true},
		{"go install module@version", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.1.0"}}, [3]string{},
			"v0.1.0", "", "", false},
		{"no VCS stamp (-buildvcs=false)", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, [3]string{},
			"devel", "", "", false},
		{"no build information at all", nil, [3]string{}, "devel", "", "", false},
	} {
		b := describeBuild(tc.bi, tc.stamp[0], tc.stamp[1], tc.stamp[2])
		if b.Version != tc.version || b.Commit != tc.commit || b.BuildTime != tc.time || b.Modified != tc.modified {
			t.Errorf("%s: version %q, commit %q, build time %q, modified %v; want %q, %q, %q, %v",
				tc.name, b.Version, b.Commit, b.BuildTime, b.Modified, tc.version, tc.commit, tc.time, tc.modified)
		}
		if b.Version == "dev" || b.Version == "" {
			t.Errorf("%s: version %q", tc.name, b.Version)
		}
	}
}

// lastMigrationOnDisk is the highest NNNNN of migrations/DIR/NNNNN_*.sql,
// read from the source tree (not from the embedded files the binary uses).
func lastMigrationOnDisk(t *testing.T, dir string) int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "migrations", dir, "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("migrations/%s: %v", dir, err)
	}
	var last int64
	for _, f := range files {
		n, err := strconv.ParseInt(strings.SplitN(filepath.Base(f), "_", 2)[0], 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		last = max(last, n)
	}
	return last
}

// TestVersionJSON: "digest version --json" is one object with exactly
// these fields; the schema versions are the last migration of each
// store's directory, whatever it is.
func TestVersionJSON(t *testing.T) {
	t.Parallel()
	code, out, errOut := runMain(t, nil, "version", "--json")
	if code != ExitOK || errOut != "" {
		t.Fatalf("digest version --json: exit %d, stderr %q", code, errOut)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	var v struct {
		Version      string `json:"version"`
		Commit       string `json:"commit"`
		Modified     *bool  `json:"modified"`
		BuildTime    string `json:"build_time"`
		GoVersion    string `json:"go_version"`
		LedgerSchema struct {
			Postgres int64 `json:"postgres"`
			SQLite   int64 `json:"sqlite"`
		} `json:"ledger_schema"`
	}
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("digest version --json: %v\n%s", err, out)
	}
	if v.Version == "" || v.Version == "dev" || v.Modified == nil || v.GoVersion != runtime.Version() {
		t.Errorf("digest version --json = %s", out)
	}
	if want := lastMigrationOnDisk(t, "postgres"); v.LedgerSchema.Postgres != want {
		t.Errorf("ledger_schema.postgres = %d; migrations/postgres ends at %d", v.LedgerSchema.Postgres, want)
	}
	if want := lastMigrationOnDisk(t, "sqlite"); v.LedgerSchema.SQLite != want {
		t.Errorf("ledger_schema.sqlite = %d; migrations/sqlite ends at %d", v.LedgerSchema.SQLite, want)
	}

	code, line, _ := runMain(t, nil, "version")
	want := "digest " + v.Version + " ("
	if code != ExitOK || !strings.HasPrefix(line, want) || strings.Count(line, "\n") != 1 ||
		!strings.Contains(line, "postgres "+strconv.FormatInt(v.LedgerSchema.Postgres, 10)) {
		t.Errorf("digest version = %q; want one line starting %q with the schema versions", line, want)
	}
	if code, _, _ := runMain(t, nil, "--version"); code != ExitOK {
		t.Errorf("digest --version: exit %d", code)
	}
}

// TestVersionLine: the line shows what the JSON has, the commit short.
func TestVersionLine(t *testing.T) {
	t.Parallel()
	b := describeBuild(goBuild("v0.1.0", false), "", "", "")
	got := b.String()
	want := "digest v0.1.0 (commit dc6c0e0b580e; built 2026-12-02T02:03:53Z; go1.26.8; ledger schema postgres " +
		strconv.FormatInt(b.LedgerSchema.Postgres, 10) + ", sqlite " + strconv.FormatInt(b.LedgerSchema.SQLite, 10) + ")"
	if got != want {
		t.Errorf("line %q\n want %q", got, want)
	}
}
