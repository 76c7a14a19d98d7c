package run_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/run"
)

// TestObserveLogsASampleOfWouldBeRecipients: a dry run names whom it would
// reach, by key, up to the sample size; addresses only when asked for.
func TestObserveLogsASampleOfWouldBeRecipients(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		sample    int
		addresses bool
		want      int
	}{
		{"default sample", 0, false, 10},
		{"three with addresses", 3, true, 3},
		{"none", -1, false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 20)
			var logs bytes.Buffer
			sum := f.run(f.runner(nil, nil, func(c *run.Config) {
				c.Mode = run.ModeObserve
				c.ObserveSample, c.ObserveAddresses = tc.sample, tc.addresses
				c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
			}))
			if sum.Would["claimed"] != f.want || f.want <= 10 {
				t.Fatalf("want more would-be sends than the default sample, got %+v (want %d)", sum.Would, f.want)
			}
			got, keys := 0, map[string]bool{}
			for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("log line %q: %v", line, err)
				}
				if rec["msg"] != "would send" {
					continue
				}
				got++
				key, _ := rec["key"].(string)
				if _, err := digest.ParseKey(key); err != nil || keys[key] {
					t.Errorf("sampled key %q: %v (or repeated)", key, err)
				}
				keys[key] = true
				to, hasTo := rec["to"].(string)
				if hasTo != tc.addresses || tc.addresses && !strings.Contains(to, "@") {
					t.Errorf("line %q: address present %v, want %v", line, hasTo, tc.addresses)
				}
			}
			if got != tc.want {
				t.Fatalf("%d would-send lines, want %d", got, tc.want)
			}
			if !tc.addresses && strings.Contains(logs.String(), "@example") {
				t.Fatalf("an address reached the log without being asked for:\n%s", logs.String())
			}
		})
	}
}
