package postgres_test

import (
	"errors"
	"testing"

	"github.com/weeklydigest/digest/internal/pgtest"
	"github.com/weeklydigest/digest/ledger"
	"github.com/weeklydigest/digest/ledger/postgres"
)

// NewPool's sessions plan each statement with its arguments
// (plan_cache_mode force_custom_plan; see PoolConfig) unless the URL names
// a plan cache mode, and commit synchronously (see
// TestSessionsCommitSynchronouslyWhateverTheDefault for the roles and URLs
// that ask otherwise).
func TestNewPoolSetsTheLedgersSessionSettings(t *testing.T) {
	t.Parallel()
	url := pgtest.Schema(t)
	for _, tc := range []struct{ name, url, plans string }{
		{"defaults", url, "force_custom_plan"},
		{"the URL's plan cache mode wins", withParam(t, url, "plan_cache_mode", "auto"), "auto"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, pool := postgres.OpenTest(t, tc.url, postgres.Config{})
			if got := showOn(t, pool, "plan_cache_mode"); got != tc.plans {
				t.Errorf("plan_cache_mode = %q, want %q", got, tc.plans)
			}
			if got := showOn(t, pool, "synchronous_commit"); got != "on" {
				t.Errorf("synchronous_commit = %q, want on", got)
			}
		})
	}
	if _, err := postgres.PoolConfig(""); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("PoolConfig(\"\"): %v, want ErrInvalid", err)
	}
}
