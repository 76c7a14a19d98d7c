package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --trace writes a Go execution trace of the run, and the final summary
// line says where each pipeline stage spent it.
func TestRunTraceAndStageTimes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	vars := map[string]string{
		"DIGEST_HMAC_KEYS":   testKeys,
		"DIGEST_LEDGER_PATH": filepath.Join(dir, "digest.db"),
		"DIGEST_OUTBOX_DIR":  filepath.Join(dir, "outbox"),
	}
	file := filepath.Join(dir, "run.trace")
	code, out, errOut := runMain(t, vars, "run", "--snapshot", filepath.Join("..", "..", "examples", "snapshot.jsonl"), "--week", "2026-W48", "--trace", file)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// The trace format's header: "go 1.NN trace\x00\x00\x00".
	if len(b) < 100 || !bytes.HasPrefix(b, []byte("go 1.")) || !bytes.Contains(b[:16], []byte(" trace")) {
		t.Fatalf("trace file: %d bytes starting %q; want a runtime/trace", len(b), b[:min(len(b), 16)])
	}

	var stages map[string]map[string]float64
	for line := range strings.Lines(errOut) {
		var l struct {
			Summary struct {
				Stages map[string]map[string]float64 `json:"stages"`
			} `json:"summary"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Summary.Stages != nil {
			stages = l.Summary.Stages
		}
	}
	for _, name := range []string{"read", "claim", "start", "send", "finish"} {
		st, ok := stages[name]
		if !ok {
			t.Errorf("summary.stages lacks %q: %v", name, stages)
			continue
		}
		for _, field := range []string{"busy_s", "wait_in_s", "wait_out_s"} {
			if _, ok := st[field]; !ok {
				t.Errorf("summary.stages.%s lacks %s: %v", name, field, st)
			}
		}
	}

	if code, _, errOut := runMain(t, vars, "run", "--snapshot", filepath.Join("..", "..", "examples", "snapshot.jsonl"), "--week", "2026-W48", "--trace", filepath.Join(dir, "no", "such", "dir")); code != ExitUsage {
		t.Errorf("--trace into a missing directory: exit %d, want %d (usage)\n%s", code, ExitUsage, errOut)
	}
}
