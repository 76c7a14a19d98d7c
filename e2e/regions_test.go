package e2e

import (
	"encoding/json"
	"html"
	"mime"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/internal/cldrfixture"
	"github.com/weeklydigest/digest/internal/e2etest"
	"github.com/weeklydigest/digest/unsubscribe"
)

// A week sent (the built binary, Mailpit) to a customer in every shipped
// region, most in their own time zone: each message's subject names the
// week by CLDR's range and no ISO token, its body has the region's amounts
// and the days in the customer's zone exactly as the CLDR fixture
// (digest/testdata/cldr, from ICU) writes them, and it links its own
// List-Unsubscribe URL.
func TestRegionsWeekSentAsCLDRWritesIt(t *testing.T) {
	t.Parallel()
	root := e2etest.RepoRoot()
	fx, err := cldrfixture.Load(cldrfixture.Path(root))
	if err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(root, "digest", "testdata", "regions.jsonl")
	f, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	type customer struct {
		Email, Locale string
		Zone          string `json:"time_zone"`
		Activity      []struct {
			OccurredAt  string `json:"occurred_at"`
			AmountMinor int64  `json:"amount_minor"`
			Currency    string
		}
	}
	var customers []customer
	for _, l := range strings.Split(strings.TrimSpace(string(f)), "\n") {
		var c customer
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatal(err)
		}
		customers = append(customers, c)
	}

	e := e2etest.NewEnv(t)
	e.Set("DIGEST_UNSUBSCRIBE_URL", "https://bank.example/u/{token}")
	e.Set("DIGEST_UNSUBSCRIBE_KEYS", unsubscribeKeys)
	if res := e.MustRun("run", "--snapshot", snap, "--week", "2026-W48"); res.Count(t, "sent") != len(customers) {
		t.Fatalf("sent %d, want %d\n%s", res.Count(t, "sent"), len(customers), res.Stderr)
	}
	got := received(t, e.Mailpit)
	isoWeek := regexp.MustCompile(`\d{4}-W\d{2}`)
	for _, c := range customers {
		p := got[c.Email]
		if p == nil {
			t.Errorf("%s got nothing", c.Locale)
			continue
		}
		subject, err := new(mime.WordDecoder).DecodeHeader(p.Header.Get("Subject"))
		if err != nil {
			t.Fatal(err)
		}
		if m := isoWeek.FindString(subject + p.Text + p.HTML); m != "" {
			t.Errorf("%s: ISO week token %q in the message", c.Locale, m)
		}
		rng, _ := fx.Range(c.Locale, "2026-11-23", "2026-11-29")
		want := []string{rng}
		if !strings.Contains(subject, want[0]) {
			t.Errorf("%s: subject %q lacks the range %q", c.Locale, subject, want[0])
		}
		zone := c.Zone
		if zone == "" {
			zone = "UTC"
		}
		for _, a := range c.Activity {
			amount, _ := fx.Money(c.Locale, a.Currency, a.AmountMinor)
			want = append(want, amount)
		}
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range c.Activity {
			at, err := time.Parse(time.RFC3339, a.OccurredAt)
			if err != nil {
				t.Fatal(err)
			}
			day, _ := fx.Day(c.Locale, at.In(loc).Format(time.DateOnly))
			want = append(want, day)
		}
		want = append(want, zone)
		for _, w := range want {
			if w == "" {
				t.Fatalf("%s: a value the fixture lacks", c.Locale)
			}
			if !strings.Contains(p.Text, w) || !strings.Contains(p.HTML, html.EscapeString(w)) {
				t.Errorf("%s: message lacks %+q\n%s", c.Locale, w, p.Text)
			}
		}
		uri, err := unsubscribe.CheckOneClick(p.Header)
		if err != nil || !strings.Contains(p.Text, " "+uri) || !strings.Contains(p.HTML, `<a href="`+uri+`"`) {
			t.Errorf("%s: the body does not link the header's URL %q (%v)", c.Locale, uri, err)
		}
	}
}
