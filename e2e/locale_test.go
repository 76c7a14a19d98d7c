package e2e

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/internal/e2etest"
	"github.com/weeklydigest/digest/internal/mailpittest"
	"github.com/weeklydigest/digest/unsubscribe"
)

const unsubscribeKeys = "u1:ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="

// sampleSnapshot is the README's sample: 22 customers, 20 with activity in
// 2026-W48 and subscribed, one without activity, one unsubscribed.
func sampleSnapshot() string {
	return filepath.Join(e2etest.RepoRoot(), "examples", "snapshot.jsonl")
}

// received returns every message in Mailpit, parsed from its raw form, by
// recipient address.
func received(t *testing.T, mp *mailpittest.Server) map[string]*mailpittest.Parsed {
	t.Helper()
	ctx := context.Background()
	msgs, err := mp.Messages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mailpittest.Parsed{}
	for _, m := range msgs {
		raw, err := mp.Raw(ctx, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		p, err := mailpittest.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		to := p.Header.Get("To")
		addr := to[strings.LastIndexByte(to, '<')+1 : len(to)-1]
		if out[addr] != nil {
			t.Fatalf("%s got two messages", addr)
		}
		out[addr] = p
	}
	return out
}

// The sample week, sent: every customer in their language with CLDR
// formats, a distinct one-click unsubscribe URL that verifies to them, the
// unsubscribed customer nothing.
func TestSampleWeekLocalisedWithOneClickUnsubscribe(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	e.Set("DIGEST_UNSUBSCRIBE_URL", "https://bank.example/u/{token}")
	e.Set("DIGEST_UNSUBSCRIBE_KEYS", unsubscribeKeys)
	res := e.MustRun("run", "--snapshot", sampleSnapshot(), "--week", "2026-W48")
	if s, sup := res.Count(t, "sent"), res.Count(t, "suppressed"); s != 20 || sup != 1 {
		t.Fatalf("sent %d, suppressed %d; want 20 and 1\n%s", s, sup, res.Stderr)
	}
	got := received(t, e.Mailpit)
	if len(got) != 20 || got["gone.away@example.com"] != nil {
		t.Fatalf("%d recipients (unsubscribed one among them: %v)", len(got), got["gone.away@example.com"] != nil)
	}
	for addr, want := range map[string][]string{
		"zoe.mueller@example.com":      {`lang="de"`, "Guten Tag Zoë Müller", "2.850,00\u00a0€", "Fr., 27. Nov.", "23.–29. Nov. 2026"},
		"jean-luc.rochat@example.com":  {`lang="fr"`, "-2'500.00\u00a0CHF", "mer. 25 nov."},       // fr-CH: CLDR 48.2
		"jose.alvarez@example.com":     {`lang="es-419"`, "-$1,250.50", "jue 26 de nov", "Monto"}, // es-MX
		"chloe.dubois@example.com":     {"Bonjour Chloé Dubois", "-64,00\u00a0€", "Paiement par carte"},
		"nono.garcia@example.com":      {`lang="es"`, "Hola, Ñoño García:", "-32,50\u00a0€", "mar, 24 nov"},
		"taro.yamada@example.com":      {`lang="ja"`, "山田太郎 様", "￥350,000", "11月25日(水)", "2026年11月23日～29日"},
		"aiko.tanaka@example.com":      {"田中&lt;img src=x onerror=alert(1)&gt;愛子"},
		"fatima.alkhalifa@example.com": {`lang="ar" dir="rtl"`, "١٬٥٠٠٫٠٠٠\u00a0د.ب.\u200f", "٢٣–٢٩ نوفمبر ٢٠٢٦"},
		"ahmed.hassan@example.com":     {`dir="rtl"`, "&lt;script&gt;alert(&#39;حسن&#39;)&lt;/script&gt;"},
		"acme.co@example.com":          {`lang="en"`, "£12,500.00", "Mon 23 Nov"},
		"lukasz.kowalski@example.com":  {`lang="en"`, "Hello Łukasz Kowalski"}, // pl-PL: not shipped, English
	} {
		p := got[addr]
		if p == nil {
			t.Errorf("%s got nothing", addr)
			continue
		}
		for _, w := range want {
			if !strings.Contains(p.HTML, w) && !strings.Contains(p.Text, w) {
				t.Errorf("%s: message lacks %q\n%s", addr, w, p.Text)
			}
		}
		if strings.Contains(p.HTML, "<script>") || strings.Contains(p.HTML, "<img") {
			t.Errorf("%s: HTML not escaped", addr)
		}
	}

	ids := sampleIDs(t)
	kr, err := unsubscribe.ParseKeyring(unsubscribeKeys)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for addr, p := range got {
		uri, err := unsubscribe.CheckOneClick(p.Header)
		if err != nil {
			t.Errorf("%s: %v", addr, err)
			continue
		}
		// The body shows the header's URL, as a translated link.
		if !strings.Contains(p.Text, " "+uri) || !strings.Contains(p.HTML, `<a href="`+uri+`"`) {
			t.Errorf("%s: the body does not link %s\n%s", addr, uri, p.Text)
		}
		tok, ok := strings.CutPrefix(uri, "https://bank.example/u/")
		if !ok || seen[tok] || strings.Contains(uri, ids[addr]) {
			t.Errorf("%s: URL %q is not a fresh token URL, or shows the customer id", addr, uri)
		}
		seen[tok] = true
		if id, err := kr.Verify(tok); err != nil || id != ids[addr] {
			t.Errorf("%s: token verifies as %q, %v; want %s", addr, id, err, ids[addr])
		}
	}
	// The command the endpoint's operators use agrees.
	for addr, p := range got {
		uri, _ := unsubscribe.CheckOneClick(p.Header)
		out := e.MustRun("unsubscribe-token", "--verify", strings.TrimPrefix(uri, "https://bank.example/u/"))
		if out.Stdout != ids[addr]+"\n" {
			t.Errorf("digest unsubscribe-token --verify for %s printed %q", addr, out.Stdout)
		}
		break
	}
	// No receipt for the unsubscribed customer: 20 sent, nothing else.
	if r := e.Receipts(); r["sent"] != 20 || len(r) != 1 {
		t.Fatalf("receipts %v, want 20 sent only", r)
	}
}

// sampleIDs maps the sample's addresses to customer ids.
func sampleIDs(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(sampleSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ids := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		id := between(line, `"customer_id":"`, `"`)
		ids[between(line, `"email":"`, `"`)] = id
	}
	return ids
}

func between(s, start, end string) string {
	_, rest, _ := strings.Cut(s, start)
	v, _, _ := strings.Cut(rest, end)
	return v
}

// A customer whose locale changes between two runs of a week is not sent a
// second digest in the new language: the locale is content, so the
// receipt's fingerprint no longer matches and the digest is quarantined.
func TestLocaleChangeBetweenRunsIsNeverSentTwice(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	first := e.MustRun("run", "--snapshot", sampleSnapshot(), "--week", "2026-W48")
	if first.Count(t, "sent") != 20 {
		t.Fatalf("first run sent %d", first.Count(t, "sent"))
	}
	b, err := os.ReadFile(sampleSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(b), `"locale":"ja-JP"`, `"locale":"en-GB"`, 1) // renders in English now
	changed = strings.Replace(changed, `"locale":"de-DE"`, `"locale":"de-AT"`, 1)    // renders the same German
	path := filepath.Join(e.Dir, "changed.jsonl")
	if err := os.WriteFile(path, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	second := e.Run("run", "--snapshot", path, "--week", "2026-W48")
	if second.Code != 4 || second.Count(t, "quarantined") != 2 || second.Count(t, "sent") != 0 || second.Count(t, "duplicates") != 18 {
		t.Fatalf("second run: exit %d, %v; want exit 4 with 2 quarantined, 18 duplicates, none sent", second.Code, second.Summary(t))
	}
	if n := e.MailpitCount(); n != 20 {
		t.Fatalf("Mailpit holds %d messages after the locale change, want the first 20", n)
	}
}

// Suppression on the PostgreSQL source: the optional unsubscribed_at column
// added to a database on the old contract; the suppressed customers get
// nothing and no receipt, so when they subscribe again the same week
// reaches them.
func TestSuppressedCustomersNotSentPostgres(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(40, week40)
	ctx := context.Background()
	if _, err := e.Pool.Exec(ctx, `ALTER TABLE digest_customers ADD COLUMN unsubscribed_at timestamptz`); err != nil {
		t.Fatal(err)
	}
	var gone []string
	for addr := range want {
		if len(gone) < 3 {
			gone = append(gone, addr)
		}
	}
	if _, err := e.Pool.Exec(ctx, `UPDATE digest_customers SET unsubscribed_at = now() WHERE email = ANY($1)`, gone); err != nil {
		t.Fatal(err)
	}
	first := e.MustRun("run", "--week", "2026-W40")
	kept := map[string]bool{}
	for a := range want {
		kept[a] = true
	}
	for _, a := range gone {
		delete(kept, a)
	}
	e.AssertExactlyOnce(kept)
	if first.Count(t, "suppressed") != 3 || first.Count(t, "sent") != len(kept) {
		t.Fatalf("first run: %v; want 3 suppressed, %d sent", first.Summary(t), len(kept))
	}
	if r := e.Receipts(); r["sent"] != len(kept) || len(r) != 1 {
		t.Fatalf("receipts %v, want %d sent only", r, len(kept))
	}
	if _, err := e.Pool.Exec(ctx, `UPDATE digest_customers SET unsubscribed_at = NULL`); err != nil {
		t.Fatal(err)
	}
	second := e.MustRun("run", "--week", "2026-W40")
	e.AssertExactlyOnce(want)
	if second.Count(t, "sent") != 3 || second.Count(t, "suppressed") != 0 {
		t.Fatalf("second run: %v; want the 3 re-subscribed sent", second.Summary(t))
	}
}
