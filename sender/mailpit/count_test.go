package mailpit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/smtp"
	"slices"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/internal/mailpittest"
	"github.com/weeklydigest/digest/sender"
	"github.com/weeklydigest/digest/sender/mailpit"
	"github.com/weeklydigest/digest/verify"
)

// The look-up answers "digest verify" by counting and listing.
var (
	_ verify.Counter = (*mailpit.Lookup)(nil)
	_ verify.Lister  = (*mailpit.Lookup)(nil)
)

// deliver sends Mailpit one message carrying key in the headers the mailer
// sets (X-Digest-Key, X-Tags), straight over SMTP.
func deliver(t *testing.T, mp *mailpittest.Server, key digest.Key, n int) {
	t.Helper()
	msg := fmt.Sprintf("From: digest@bank.example\r\nTo: someone@example.com\r\nSubject: copy %d\r\n%s: %s\r\n%s: %s\r\n\r\nbody\r\n",
		n, sender.HeaderKey, key, sender.HeaderMailpitTags, sender.MailpitTag(key))
	if err := smtp.SendMail(mp.SMTPAddr(), nil, "digest@bank.example", []string{"someone@example.com"}, []byte(msg)); err != nil {
		t.Fatal(err)
	}
}

// Mailpit's Count is the number of messages tagged with the key: none,
// once, twice; a key id in upper case finds its lower-case tag. ListKeys
// returns every tagged message's key (once per message), and nothing for a
// message without a digest tag.
func TestMailpitCountAndListKeys(t *testing.T) {
	t.Parallel()
	mp := mailpittest.Start(t)
	once, twice, none, upper := testKey("k1", 'a'), testKey("k1", 'b'), testKey("k1", 'c'), testKey("K2", 'd')
	deliver(t, mp, once, 1)
	deliver(t, mp, twice, 1)
	deliver(t, mp, twice, 2)
	deliver(t, mp, upper, 1)
	if err := smtp.SendMail(mp.SMTPAddr(), nil, "x@example.com", []string{"y@example.com"}, []byte("Subject: untagged\r\n\r\nhi\r\n")); err != nil {
		t.Fatal(err)
	}
	m := mailpit.New(mailpit.Config{Base: mp.APIURL()})
	for key, want := range map[digest.Key]int{once: 1, twice: 2, none: 0, upper: 1} {
		if got, err := m.Count(t.Context(), key); err != nil || got != want {
			t.Errorf("Count(%s) = %d, %v; want %d", key, got, err, want)
		}
	}
	var listed []digest.Key
	err := m.ListKeys(t.Context(), func(page []digest.Key) error {
		listed = append(listed, page...)
		return nil
	})
	slices.Sort(listed)
	want := []digest.Key{testKey("k2", 'd'), once, twice, twice}
	slices.Sort(want)
	if err != nil || !slices.Equal(listed, want) {
		t.Fatalf("ListKeys = %v, %v; want %v", listed, err, want)
	}
}

// Listing pages through more messages than one page holds, each once,
// even when messages arrive between two pages and push the end of the
// first onto the next.
func TestMailpitListKeysPages(t *testing.T) {
	t.Parallel()
	mp := mailpittest.Start(t)
	const n = 1005
	send := func(from, to int) {
		c, err := smtp.Dial(mp.SMTPAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Quit()
		for i := from; i < to; i++ {
			key := digest.Key(fmt.Sprintf("k1:%064x", i))
			if err := c.Mail("digest@bank.example"); err != nil {
				t.Fatal(err)
			}
			if err := c.Rcpt("someone@example.com"); err != nil {
				t.Fatal(err)
			}
			w, err := c.Data()
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(w, "Subject: %d\r\nX-Tags: %s\r\n\r\nbody\r\n", i, sender.MailpitTag(key))
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(0, n)
	seen := map[digest.Key]int{}
	pages := 0
	err := mailpit.New(mailpit.Config{Base: mp.APIURL()}).ListKeys(t.Context(), func(page []digest.Key) error {
		pages++
		if pages == 1 {
			send(n, n+7) // newest first: they shift every later page by 7
		}
		for _, k := range page {
			seen[k]++
		}
		return nil
	})
	if err != nil || pages != 2 {
		t.Fatalf("ListKeys: %d pages, %v; want 2", pages, err)
	}
	for i := range n {
		if k := digest.Key(fmt.Sprintf("k1:%064x", i)); seen[k] != 1 {
			t.Errorf("%s listed %d times, want once", k, seen[k])
		}
	}
}

// Every Mailpit listing reply carries every tag of the mailbox: at 100,000
// digests some 7 MB, more than a look-up reply may be. The listing reads it
// (an httptest server replaying Mailpit's shape at that size).
func TestMailpitListKeysReadsTheTagsOfABigMailbox(t *testing.T) {
	t.Parallel()
	const n = 100_000
	tags := make([]string, n)
	for i := range tags {
		tags[i] = sender.MailpitTag(digest.Key(fmt.Sprintf("k1:%064x", i)))
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/messages" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"total":%d,"messages_count":%d,"start":0,"tags":["%s"],"messages":[{"ID":"m1","Tags":[%q]}]}`,
			n, n, strings.Join(tags, `","`), tags[7])
	}))
	t.Cleanup(srv.Close)
	var got []digest.Key
	err := mailpit.New(mailpit.Config{Base: srv.URL}).ListKeys(t.Context(), func(page []digest.Key) error {
		got = append(got, page...)
		return nil
	})
	if want := digest.Key(fmt.Sprintf("k1:%064x", 7)); err != nil || len(got) != 1 || got[0] != want {
		t.Fatalf("ListKeys = %v, %v; want [%s]", got, err, want)
	}
}
