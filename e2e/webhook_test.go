package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/emersion/go-smtp"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/browsertest"
	"github.com/weeklydigest/digest/internal/e2etest"
	"github.com/weeklydigest/digest/internal/mailpittest"
	"github.com/weeklydigest/digest/unsubscribe"
)

// postmarkAuth is the webhook URL's Basic credentials, as set at Postmark.
const postmarkAuth = "postmark-hook:s3cret-hook-pass"

// withPostmarkWebhook writes the credentials file and returns the setting
// that gives "digest serve" the Postmark webhook.
func withPostmarkWebhook(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "postmark-webhook")
	if err := os.WriteFile(path, []byte(postmarkAuth+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return "DIGEST_POSTMARK_WEBHOOK_AUTH_FILE=" + path
}

// postmark posts one Postmark webhook record to the service, with the
// Basic credentials auth ("" for none), and returns the status.
func (s *serving) postmark(t *testing.T, auth string, record map[string]any) int {
	t.Helper()
	b, err := json.Marshal(record)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, s.base+"/webhooks/postmark", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if user, pass, ok := strings.Cut(auth, ":"); ok {
		req.SetBasicAuth(user, pass)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// postmarkRecord is a record of the kind Postmark posts (RecordType
// Delivery, Bounce or SpamComplaint) about the message with key to addr.
func postmarkRecord(recordType string, id int, key digest.Key, addr string) map[string]any {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	r := map[string]any{
		"RecordType": recordType, "MessageStream": "outbound", "ServerID": 23,
		"MessageID": fmt.Sprintf("00000000-0000-0000-0000-%012d", id),
		"Metadata":  map[string]string{"digest-key": string(key)},
	}
	switch recordType {
	case "Delivery":
		r["Recipient"], r["DeliveredAt"], r["Details"] = addr, now, "Message delivered"
	case "Bounce":
		r["ID"], r["Type"], r["TypeCode"], r["Email"], r["BouncedAt"] = id, "HardBounce", 1, addr, now
		r["Details"] = "smtp;550 5.1.1 <" + addr + ">: Recipient address rejected"
	case "SpamComplaint":
		r["ID"], r["Type"], r["TypeCode"], r["Email"], r["BouncedAt"] = id, "SpamComplaint", 512, addr, now
	}
	return r
}

// The "Done when" of issue 20, end to end: a week goes out through
// Mailpit; two recipients unsubscribe with one click, two hard-bounce and
// one complains, reported by Postmark's webhook to "digest serve" (one
// report sent twice); a forged webhook (wrong credentials) and a forged
// token change nothing. The next week's run sends to none of the five,
// counts them as suppressed, and sends everyone else, the victims of the
// forgeries included, once. The bounces are on their receipts' history;
// no address is in the logs or the ledger's event tables.
func TestWebhooksAndOneClickSuppressTheNextWeek(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	e.Set("DIGEST_UNSUBSCRIBE_URL", unsubscribeTemplate)
	e.Set("DIGEST_UNSUBSCRIBE_KEYS", unsubscribeKeys)
	week41 := digest.ISOWeek{Year: 2026, Week: 41}
	want40 := e.Seed(40, week40)
	want41 := e.Seed(40, week41)
	srv := startServe(t, e, withPostmarkWebhook(t))

	if first := e.MustRun("run", "--week", "2026-W40"); first.Count(t, "sent") != len(want40) {
		t.Fatalf("week 40: %v", first.Summary(t))
	}
	type recipient struct {
		addr, uri string
		key       digest.Key
	}
	var both []recipient
	for addr, p := range received(t, e.Mailpit) {
		if !want41[addr] {
			continue
		}
		uri, err := unsubscribe.CheckOneClick(p.Header)
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		both = append(both, recipient{addr: addr, uri: uri, key: digest.Key(p.Header.Get("X-Digest-Key"))})
	}
	if len(both) < 8 {
		t.Fatalf("%d recipients in both weeks; want at least 8", len(both))
	}
	unsubscribed, bounced, complained, forgedHook, forgedToken, clicked := both[0:2], both[2:4], both[4], both[5], both[6], both[7]
	for _, r := range unsubscribed {
		if code := oneClick(t, srv.local(t, r.uri)); code != 200 {
			t.Fatalf("one-click POST: %d", code)
		}
	}
	// A reader opens the link in a real browser (no JavaScript): the page
	// alone records nothing, its button does.
	page := browsertest.Open(t, "en-US,en;q=0.9")
	if err := chromedp.Do(page, chromedp.Navigate(srv.local(t, clicked.uri)), chromedp.WaitVisible(chromedp.ID("unsubscribe"))); err != nil {
		t.Fatal(err)
	}
	if list := e.MustRun("suppression", "list").Stdout; strings.Count(list, "one-click") != 2 {
		t.Fatalf("after opening the page: want only the 2 POSTs recorded:\n%s", list)
	}
	if err := chromedp.Do(page, chromedp.Click(chromedp.ID("unsubscribe")), chromedp.WaitNotPresent(chromedp.ID("unsubscribe"))); err != nil {
		t.Fatal(err)
	}
	for i, r := range bounced {
		rec := postmarkRecord("Bounce", 100+i, r.key, r.addr)
		for range 2 - i { // the first report twice: a provider's retry
			if code := srv.postmark(t, postmarkAuth, rec); code != 200 {
				t.Fatalf("bounce webhook: %d", code)
			}
		}
	}
	if code := srv.postmark(t, postmarkAuth, postmarkRecord("SpamComplaint", 200, complained.key, complained.addr)); code != 200 {
		t.Fatalf("complaint webhook: %d", code)
	}
	if code := srv.postmark(t, "postmark-hook:guessed", postmarkRecord("Bounce", 300, forgedHook.key, forgedHook.addr)); code != 401 {
		t.Fatalf("forged webhook: %d, want 401", code)
	}
	if code := srv.postmark(t, "", postmarkRecord("SpamComplaint", 301, forgedHook.key, forgedHook.addr)); code != 401 {
		t.Fatalf("webhook without credentials: %d, want 401", code)
	}
	tampered := []byte(srv.local(t, forgedToken.uri))
	if c := &tampered[len(tampered)-2]; *c == 'A' {
		*c = 'B'
	} else {
		*c = 'A'
	}
	if code := oneClick(t, string(tampered)); code != 404 {
		t.Fatalf("forged token: %d, want 404", code)
	}

	ctx := context.Background()
	var notes, events int
	if err := e.Pool.QueryRow(ctx, `SELECT count(*) FROM receipt_events WHERE detail LIKE 'provider postmark reported %'`).Scan(&notes); err != nil || notes != 3 {
		t.Fatalf("%d provider notes on receipts, %v; want 3 (two bounces, one complaint)", notes, err)
	}
	if err := e.Pool.QueryRow(ctx, `SELECT count(*) FROM provider_events WHERE provider = 'postmark'`).Scan(&events); err != nil || events != 3 {
		t.Fatalf("%d provider events, %v; want 3 (the repeated report once)", events, err)
	}
	var leaked int
	if err := e.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM provider_events WHERE detail ~ '@' OR address_key ~ '@' OR event_id ~ '@')
		+ (SELECT count(*) FROM receipt_events WHERE detail ~ '@')`).Scan(&leaked); err != nil || leaked != 0 {
		t.Fatalf("%d rows with an address, %v", leaked, err)
	}

	e.Mailpit = mailpittest.Start(t) // the next week's inbox
	e.Set("DIGEST_SMTP_URL", "smtp://"+e.Mailpit.SMTPAddr()+"?tls=none")
	e.Set("DIGEST_LOOKUP_URL", "mailpit+"+e.Mailpit.APIURL())
	second := e.MustRun("run", "--week", "2026-W41")
	kept := map[string]bool{}
	for a := range want41 {
		kept[a] = true
	}
	for _, r := range append(append(append([]recipient{}, unsubscribed...), bounced...), complained, clicked) {
		delete(kept, r.addr)
	}
	e.AssertExactlyOnce(kept)
	if !kept[forgedHook.addr] || !kept[forgedToken.addr] {
		t.Fatal("a forgery's victim lost their digest")
	}
	if second.Count(t, "suppressed") != 6 || second.Count(t, "sent") != len(kept) {
		t.Fatalf("week 41: %v; want 6 suppressed and %d sent", second.Summary(t), len(kept))
	}
	list := e.MustRun("suppression", "list").Stdout
	if strings.Count(list, "postmark") != 3 || strings.Count(list, "one-click") != 3 || strings.Contains(list, "@") {
		t.Fatalf("suppression list: want 3 from postmark, 3 one-click (one through the page), no address:\n%s", list)
	}

	lines, err := srv.stop(t)
	if err != nil {
		t.Fatalf("digest serve on SIGTERM: %v", err)
	}
	logs := strings.Join(lines, "\n")
	if !strings.Contains(logs, `"msg":"address suppressed"`) || strings.Contains(logs, "@") || strings.Contains(logs, "s3cret") {
		t.Fatalf("serve logs: want the suppressions, no address or credential:\n%s", logs)
	}
}

// relay is an in-test SMTP provider without a search API: it keeps the
// messages it takes by their digest key, and drops the connection after
// the data of each key's first message, before its reply, having either
// kept the message (reached) or not (lost), as reach decides: the job
// cannot tell which.
type relay struct {
	addr  string
	reach func(key digest.Key) bool

	mu    sync.Mutex
	kept  map[digest.Key]int
	to    map[digest.Key]string
	tries map[digest.Key]int
}

func startRelay(t *testing.T, reach func(digest.Key) bool) *relay {
	t.Helper()
	r := &relay{reach: reach, kept: map[digest.Key]int{}, to: map[digest.Key]string{}, tries: map[digest.Key]int{}}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &relaySession{r: r, conn: c.Conn()}, nil
	}))
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = l.Addr().String()
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return r
}

type relaySession struct {
	r    *relay
	conn net.Conn
	to   string
}

func (s *relaySession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *relaySession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = to
	return nil
}
func (s *relaySession) Reset()        { s.to = "" }
func (s *relaySession) Logout() error { return nil }

func (s *relaySession) Data(rd io.Reader) error {
	m, err := mail.ReadMessage(rd)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, m.Body)
	key := digest.Key(m.Header.Get("X-Digest-Key"))
	r := s.r
	r.mu.Lock()
	r.tries[key]++
	first := r.tries[key] == 1
	keep := !first || r.reach(key)
	if keep {
		r.kept[key]++
		r.to[key] = s.to
	}
	r.mu.Unlock()
	if first {
		s.conn.Close() // before the reply: the job cannot know
		return &smtp.SMTPError{Code: 421, Message: "gone"}
	}
	return nil
}

func (r *relay) snapshot() (kept map[digest.Key]int, to map[digest.Key]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	kept, to = map[digest.Key]int{}, map[digest.Key]string{}
	for k, n := range r.kept {
		kept[k], to[k] = n, r.to[k]
	}
	return kept, to
}

// An ambiguous send through a provider without a search API is
// reconciled from the provider's delivery event, posted to "digest serve",
// instead of held: looked up in the events (DIGEST_LOOKUP_URL=events:
// postmark), found, recorded sent, no second message. A send with no
// event is held (retryable, never resent) until the provider's events are
// known complete past it ("digest events watermark"); then "not found"
// sends it once.
func TestAmbiguousSendReconciledFromWebhookEvents(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t)
	want := e.Seed(12, week40)
	rl := startRelay(t, func(k digest.Key) bool { return k.Hex()[0]%2 == 0 })
	e.Set("DIGEST_SMTP_URL", "smtp://"+rl.addr+"?tls=none")
	e.Set("DIGEST_LOOKUP_URL", "events:postmark")
	e.Set("DIGEST_EVENTS_LAG", "1h")
	e.Set("DIGEST_UNSUBSCRIBE_URL", unsubscribeTemplate)
	e.Set("DIGEST_UNSUBSCRIBE_KEYS", unsubscribeKeys)
	srv := startServe(t, e, withPostmarkWebhook(t))

	// A look-up comes due the backoff (15 to 30s) after an ambiguous send:
	// a run with a shorter deadline leaves them all for the next.
	first := e.Run("run", "--week", "2026-W40", "--deadline", "5s", "--lookup-delay", "1s")
	if first.Code != 3 || first.Count(t, "sent") != 0 || first.Count(t, "reconciled") != 0 {
		t.Fatalf("first run: exit %d, %v; want 3, every send ambiguous and left for a look-up\n%s", first.Code, first.Summary(t), first.Stderr)
	}
	kept, to := rl.snapshot()
	reached, lost := len(kept), len(want)-len(kept)
	if reached == 0 || lost == 0 {
		t.Fatalf("%d reached, %d lost: the test needs both", reached, lost)
	}
	// The provider reports the deliveries of the messages it kept.
	i := 0
	for key := range kept {
		i++
		if code := srv.postmark(t, postmarkAuth, postmarkRecord("Delivery", i, key, to[key])); code != 200 {
			t.Fatalf("delivery webhook: %d", code)
		}
	}
	// A minute passes: the look-ups come due (the sends' start and next
	// attempt move back by as much), so that the next run need not wait
	// out the backoff.
	elapse(t, e, "1 minute")
	second := e.Run("run", "--week", "2026-W40", "--deadline", "10s", "--lookup-delay", "1s")
	if second.Count(t, "reconciled") != reached || second.Count(t, "sent") != 0 || second.Count(t, "lookup_errors") < lost || second.Code != 3 {
		t.Fatalf("second run: exit %d, %v; want %d reconciled from their events, the %d others still held", second.Code, second.Summary(t), reached, lost)
	}
	if list := e.MustRun("events", "list").Stdout; !strings.Contains(list, "postmark") {
		t.Fatalf("events list:\n%s", list)
	}
	for key := range kept {
		if show := e.MustRun("events", "show", "--provider", "postmark", "--key", string(key)).Stdout; !strings.Contains(show, "delivered") || !strings.HasSuffix(strings.TrimSpace(show), ": found") {
			t.Fatalf("events show of a delivered key:\n%s", show)
		}
		break
	}
	// Ten minutes pass (the look-up says not found only for a send more
	// than 5 minutes before the watermark); the operator checked
	// Postmark's webhook log: nothing failed, no backlog; the events are
	// complete up to now.
	elapse(t, e, "10 minutes")
	if r := e.Run("events", "watermark", "--provider", "postmark", "--until", time.Now().UTC().Add(time.Hour).Format(time.RFC3339), "--reason", "typo", "--by", "oncall"); r.Code != 1 {
		t.Fatalf("a watermark in the future: exit %d, want 1 (refused)\n%s", r.Code, r.Stderr)
	}
	until := time.Now().UTC().Add(-time.Second).Format(time.RFC3339)
	e.MustRun("events", "watermark", "--provider", "postmark", "--until", until, "--reason", "Postmark webhook log: no failures", "--by", "oncall")
	third := e.Run("run", "--week", "2026-W40", "--deadline", "150s", "--lookup-delay", "1s")
	if third.Code != 0 || third.Count(t, "sent") != lost || third.Count(t, "lookups_not_found") != lost {
		t.Fatalf("third run: exit %d, %v; want the %d lost ones sent after a not found\n%s", third.Code, third.Summary(t), lost, third.Stderr)
	}
	kept, _ = rl.snapshot()
	if len(kept) != len(want) {
		t.Fatalf("the relay holds %d digests, want %d", len(kept), len(want))
	}
	for k, n := range kept {
		if n != 1 {
			t.Errorf("%s reached the provider %d times", k, n)
		}
	}
	if rc := e.Receipts(); rc["sent"] != len(want) || len(rc) != 1 {
		t.Fatalf("receipts %v", rc)
	}
}

// elapse moves the receipts' send starts and next attempts back by d (a
// PostgreSQL interval): as if that much time had passed since the last run.
func elapse(t *testing.T, e *e2etest.Env, d string) {
	t.Helper()
	if _, err := e.Pool.Exec(context.Background(), `UPDATE receipts SET send_started_at = send_started_at - $1::interval,
		next_attempt_at = next_attempt_at - $1::interval`, d); err != nil {
		t.Fatal(err)
	}
}
