package faults

import (
	"strings"
	"testing"

	"github.com/weeklydigest/digest/internal/e2etest"
)

// Issue 23, durability the job enforces: on a PostgreSQL server set so
// that a committed receipt may be gone after a crash (fsync off, or
// full_page_writes off: a torn page), "digest run" refuses to send, exit
// 2, naming the setting and the value to set; nothing is claimed or sent.
func TestRunRefusesAServerThatCannotKeepAReceipt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ conf, words string }{
		{"fsync = off", "fsync = off (the server never forces its WAL to disk; set fsync = on)"},
		{"full_page_writes = off", "full_page_writes = off (a page half written by a crash cannot be repaired from the WAL; set full_page_writes = on)"},
	} {
		t.Run(strings.Fields(tc.conf)[0], func(t *testing.T) {
			t.Parallel()
			pg := startCluster(t, tc.conf)
			e := e2etest.NewEnvOn(t, pg.URL())
			e.Seed(30, week40)

			r := e.Run("run", "--week", week40s)
			if r.Code != 2 || !strings.Contains(r.Stderr, "cannot keep a committed receipt across a crash") || !strings.Contains(r.Stderr, tc.words) {
				t.Fatalf("run on a server with %s: exit %d; want 2 naming %q\n%s", tc.conf, r.Code, tc.words, r.Stderr)
			}
			if n, rec := e.MailpitCount(), e.Receipts(); n != 0 || len(rec) != 0 {
				t.Fatalf("a refused run sent %d messages and left receipts %v; want none", n, rec)
			}
		})
	}
}
