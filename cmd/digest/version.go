package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/weeklydigest/digest/migrations"
)

// Stamped at build time by the Makefile, the Dockerfile and
// scripts/release: -ldflags "-X main.version=v1.2.3 -X main.commit=SHA
// -X main.buildTime=2026-12-01T10:00:00Z". Empty in a plain "go build" or
// "go install": the module version and the VCS stamp of
// debug.ReadBuildInfo stand in for them.
var (
	version   string
	commit    string
	buildTime string
)

const versionHelp = `Usage: digest version [--json]

Prints the version of this binary, the commit it was built from and when,
the Go release, and the ledger schema versions it expects (the last
embedded migration of each store: "digest migrate" brings a ledger there).

The version is the one stamped at build time (make build, the Dockerfile,
scripts/release); a binary from a plain "go build" or "go install" reports
the module version and the commit Go recorded (debug.ReadBuildInfo), and
"+dirty" when the tree had uncommitted changes.
`

// buildInfo is what "digest version --json" prints.
type buildInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"`
	// Modified: built from a tree with uncommitted changes.
	Modified bool `json:"modified"`
	// BuildTime is the commit's time in a release (a rebuild of the same
	// commit gives the same bytes), or the VCS time Go recorded.
	BuildTime string `json:"build_time,omitempty"`
	GoVersion string `json:"go_version"`
	// LedgerSchema is the migration each store's schema must be at.
	LedgerSchema schemaVersions `json:"ledger_schema"`
}

type schemaVersions struct {
	Postgres int64 `json:"postgres"`
	SQLite   int64 `json:"sqlite"`
}

// currentBuild describes this binary.
func currentBuild() buildInfo {
	bi, _ := debug.ReadBuildInfo()
	return describeBuild(bi, version, commit, buildTime)
}

// describeBuild combines the ldflags stamp (stamped*, empty when not set)
// with Go's build information (nil when the binary has none).
func describeBuild(bi *debug.BuildInfo, stampedVersion, stampedCommit, stampedTime string) buildInfo {
	out := buildInfo{
		Version: stampedVersion, Commit: stampedCommit, BuildTime: stampedTime, GoVersion: runtime.Version(),
		LedgerSchema: schemaVersions{Postgres: migrations.Last(migrations.Postgres()), SQLite: migrations.Last(migrations.SQLite())},
	}
	if bi != nil {
		out.GoVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if out.Commit == "" {
					out.Commit = s.Value
				}
			case "vcs.time":
				if out.BuildTime == "" {
					out.BuildTime = s.Value
				}
			case "vcs.modified":
				out.Modified = s.Value == "true"
			}
		}
		if out.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			out.Version = bi.Main.Version
		}
	}
	if out.Version == "" {
		// Neither stamped nor known to Go (built without VCS information,
		// or -buildvcs=false): name the commit when there is one.
		out.Version = "devel"
		if out.Commit != "" {
			out.Version += "-" + shortCommit(out.Commit)
		}
	}
	if out.Modified && !strings.HasSuffix(out.Version, "+dirty") {
		out.Version += "+dirty"
	}
	return out
}

func shortCommit(c string) string { return c[:min(len(c), 12)] }

// String is the one line "digest version" prints.
func (b buildInfo) String() string {
	var parts []string
	if b.Commit != "" {
		parts = append(parts, "commit "+shortCommit(b.Commit))
	}
	if b.BuildTime != "" {
		parts = append(parts, "built "+b.BuildTime)
	}
	parts = append(parts, b.GoVersion, fmt.Sprintf("ledger schema postgres %d, sqlite %d", b.LedgerSchema.Postgres, b.LedgerSchema.SQLite))
	return fmt.Sprintf("digest %s (%s)", b.Version, strings.Join(parts, "; "))
}

func cmdVersion(_ context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "version", versionHelp)
	asJSON := fs.Bool("json", false, "print one JSON object (for scripts) instead of a line")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	b := currentBuild()
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(b)
	}
	fmt.Fprintln(env.Stdout, b)
	return nil
}
