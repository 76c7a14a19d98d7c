package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/internal/e2etest"
)

// versionStatus is what the test below reads of "status --json".
type versionStatus struct {
	Verdict       string           `json:"verdict"`
	Expected      *int64           `json:"expected"`
	Settled       int64            `json:"settled"`
	Receipts      map[string]int64 `json:"receipts"`
	Customers     map[string]int64 `json:"customers"`
	OtherVersions []string         `json:"other_versions"`
	MoreThanOne   int64            `json:"customers_more_than_one_version"`
}

// Issue 35, defect 2: "digest run --version v2" on a week sent under v1
// resent every digest with exit 0 and no warning, and status said "sent
// 1766 of expected 883", complete. Now the run is refused (exit 2, naming
// v1 and its count, nothing sent); --resend-as-new-version --reason sends
// it and keeps who and why on the pin; status counts customers and says
// how many got the week under both versions.
func TestNewVersionOnASentWeekIsRefusedUnlessAsked(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(30, week40)
	n := len(want)
	e.MustRun("run", "--week", "2026-W40")
	e.AssertExactlyOnce(want)

	refused := e.Run("run", "--week", "2026-W40", "--version", "v2")
	if refused.Code != 2 {
		t.Fatalf("run --version v2: exit %d, want 2\n%s%s", refused.Code, refused.Stdout, refused.Stderr)
	}
	for _, s := range []string{fmt.Sprintf("v1: %d sent or in flight", n), "--resend-as-new-version", "nothing was claimed"} {
		if !strings.Contains(refused.Stderr, s) {
			t.Fatalf("the refusal does not say %q:\n%s", s, refused.Stderr)
		}
	}
	if got := e.MailpitCount(); got != n {
		t.Fatalf("after the refused run Mailpit holds %d messages, want %d", got, n)
	}
	if r := e.Run("run", "--week", "2026-W40", "--version", "v2", "--resend-as-new-version"); r.Code != 2 || !strings.Contains(r.Stderr, "--reason") {
		t.Fatalf("--resend-as-new-version without --reason: exit %d\n%s", r.Code, r.Stderr)
	}
	if r := e.Run("run", "--week", "2026-W40", "--version", "v2", "--mode", "observe"); r.Code != 0 || !r.Says("an enforce run would refuse it") || e.MailpitCount() != n {
		t.Fatalf("observe run of v2: exit %d, %d messages\n%s", r.Code, e.MailpitCount(), r.Stderr)
	}

	asked := e.MustRun("run", "--week", "2026-W40", "--version", "v2", "--resend-as-new-version", "--reason", "totals fixed (OPS-7)", "--by", "ana")
	if asked.Count(t, "sent") != n || e.MailpitCount() != 2*n {
		t.Fatalf("the resend as v2: summary %v, %d messages; want %d sent", asked.Summary(t), e.MailpitCount(), n)
	}
	if again := e.MustRun("run", "--week", "2026-W40", "--version", "v2"); again.Count(t, "sent") != 0 || e.MailpitCount() != 2*n {
		t.Fatalf("v2 again without the flag: summary %v, %d messages", again.Summary(t), e.MailpitCount())
	}

	for _, v := range []string{"v1", "v2"} {
		for _, extra := range [][]string{nil, {"--customers"}} {
			args := append([]string{"status", "--week", "2026-W40", "--version", v, "--json"}, extra...)
			r := e.Run(args...)
			var st versionStatus
			if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil {
				t.Fatalf("%v: %v\n%s%s", args, err, r.Stdout, r.Stderr)
			}
			other := map[string]string{"v1": "v2", "v2": "v1"}[v]
			if r.Code != 0 || st.Verdict != "complete" || st.Customers["sent"] != int64(n) || st.Settled != int64(n) ||
				st.Receipts["sent"] != int64(n) || st.MoreThanOne != int64(n) || fmt.Sprint(st.OtherVersions) != "["+other+"]" {
				t.Fatalf("%v: exit %d; want complete, %d customers sent, settled and more than one version, other %s:\n%s", args, r.Code, n, other, r.Stdout)
			}
		}
	}
	// verify checks each receipt's message, and counts customers.
	vr := e.Run("verify", "--week", "2026-W40", "--json")
	var vj struct {
		Sent        int              `json:"sent"`
		FoundOnce   int              `json:"found_once"`
		ByVersion   map[string]int64 `json:"sent_by_version"`
		Customers   *int64           `json:"customers_sent"`
		MoreThanOne *int64           `json:"customers_more_than_one_version"`
		ExitCode    int              `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(vr.Stdout), &vj); err != nil {
		t.Fatalf("verify --json: %v\n%s%s", err, vr.Stdout, vr.Stderr)
	}
	if vr.Code != 0 || vj.Sent != 2*n || vj.FoundOnce != 2*n || vj.ByVersion["v1"] != int64(n) || vj.ByVersion["v2"] != int64(n) ||
		vj.Customers == nil || *vj.Customers != int64(n) || vj.MoreThanOne == nil || *vj.MoreThanOne != int64(n) {
		t.Fatalf("verify --json: exit %d; want %d receipts found once, %d customers, all under more than one version:\n%s%s", vr.Code, 2*n, n, vr.Stdout, vr.Stderr)
	}
	vt := e.MustRun("verify", "--week", "2026-W40")
	wantLines(t, "verify", vt.Stdout, `^versions: the week's sent receipts are of 2 content versions of weekly_activity \(v1 `+fmt.Sprint(n)+`, v2 `+fmt.Sprint(n)+`\)`,
		fmt.Sprintf(`^customers: %d sent under DIGEST_VERSION, %d of them under more than one version`, n, n))

	// key --all and review show --customer list the receipt of each version.
	var id string
	if err := e.Pool.QueryRow(context.Background(), `SELECT c.customer_id FROM digest_customers c
		WHERE EXISTS (SELECT 1 FROM digest_activity a WHERE a.customer_id = c.customer_id) ORDER BY 1 LIMIT 1`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	keys := e.MustRun("key", "--customer", id, "--week", "2026-W40", "--all")
	wantLines(t, "key --all", keys.Stdout, `^k1:[0-9a-f]+ +v1 +sent$`, `^k1:[0-9a-f]+ +v2 +sent$`)
	shown := e.MustRun("review", "show", "--customer", id, "--week", "2026-W40", "--version", "v2")
	wantLines(t, "review show --customer", shown.Stdout, `^== weekly_activity v2$`, `^== weekly_activity v1$`,
		`^version +weekly_activity v2$`, `^version +weekly_activity v1$`, `^2 receipts of 2026-W40 for this customer, one per version`)
	text := e.MustRun("status", "--week", "2026-W40", "--version", "v2")
	wantLines(t, "status", text.Stdout, fmt.Sprintf(`^customers under more than one version +%d: sent the week as v2 and as v1`, n),
		`^sent +`+fmt.Sprint(n)+`$`, `^resent as new version +resent as new version v2 by "ana": totals fixed \(OPS-7\); the week held v1: `+fmt.Sprint(n)+` sent or in flight$`)
}
