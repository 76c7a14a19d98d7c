package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/webhook"
)

const postmarkCredentials = "digest-hook:s3cret-Pa55"

func postmarkHeader(user, pass string) http.Header {
	h := jsonHeader()
	r := http.Request{Header: h}
	r.SetBasicAuth(user, pass)
	return h
}

func newPostmark(t testing.TB) *webhook.Postmark {
	t.Helper()
	p, err := webhook.NewPostmark([]byte(postmarkCredentials + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPostmarkFixtures(t *testing.T) {
	t.Parallel()
	p := newPostmark(t)
	withKey := func(name string) []byte {
		return withField(t, fixture(t, name), string(testKey), "Metadata", webhook.PostmarkMetadataKey)
	}
	tests := []struct {
		name string
		body []byte
		want want
	}{
		{"bounce", withKey("postmark/bounce.json"), want{webhook.KindHardBounce, testKey, "john@example.com", "2019-11-05T16:33:54.9070259Z", "HardBounce"}},
		{"bounce without our key", fixture(t, "postmark/bounce.json"), want{webhook.KindHardBounce, "", "john@example.com", "", "HardBounce"}},
		{"spam complaint", withKey("postmark/spam-complaint.json"), want{webhook.KindComplaint, testKey, "john@example.com", "2019-11-05T16:33:54.9070259Z", "SpamComplaint"}},
		{"delivery", withKey("postmark/delivery.json"), want{webhook.KindDelivered, testKey, "john@example.com", "2019-11-05T16:33:54.9070259Z", ""}},
		{"subscription change", withKey("postmark/subscription-change.json"), want{webhook.KindHardBounce, testKey, "bounced-address@wildbit.com", "2020-02-01T10:53:34.416071Z", "HardBounce"}},
		{"unsubscribe", withField(t, withKey("postmark/subscription-change.json"), "ManualSuppression", "SuppressionReason"), want{webhook.KindUnsubscribe, testKey, "bounced-address@wildbit.com", "", "ManualSuppression"}},
		{"reactivation", withField(t, withKey("postmark/subscription-change.json"), false, "SuppressSending"), want{webhook.KindOther, testKey, "bounced-address@wildbit.com", "", "HardBounce"}},
		{"open", []byte(`{"RecordType":"Open","MessageID":"m","Recipient":"a@example.com"}`), want{webhook.KindOther, "", "a@example.com", "", "Open"}},
		{"an address where a type belongs", withField(t, fixture(t, "postmark/bounce.json"), "john@example.com", "Type"), want{webhook.KindOther, "", "john@example.com", "", ""}},
		{"a key of another system", withField(t, fixture(t, "postmark/bounce.json"), "order-1234", "Metadata", webhook.PostmarkMetadataKey), want{webhook.KindHardBounce, "", "john@example.com", "", "HardBounce"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := p.Parse(context.Background(), postmarkHeader("digest-hook", "s3cret-Pa55"), tt.body, testNow)
			if err != nil {
				t.Fatal(err)
			}
			checkEvents(t, "postmark", b.Events, []want{tt.want})
		})
	}
}

// Postmark's bounce types: which suppress at once, which count toward a
// streak, which say nothing about the address.
func TestPostmarkBounceTypes(t *testing.T) {
	t.Parallel()
	p := newPostmark(t)
	tests := map[string]webhook.Kind{
		"HardBounce": webhook.KindHardBounce, "BadEmailAddress": webhook.KindHardBounce, "ManuallyDeactivated": webhook.KindHardBounce,
		"Transient": webhook.KindSoftBounce, "SoftBounce": webhook.KindSoftBounce, "DnsError": webhook.KindSoftBounce,
		"Blocked": webhook.KindSoftBounce, "Unknown": webhook.KindSoftBounce, "SpamNotification": webhook.KindSoftBounce,
		"SpamComplaint": webhook.KindComplaint, "Unsubscribe": webhook.KindUnsubscribe,
		"AutoResponder": webhook.KindOther, "AddressChange": webhook.KindOther, "DMARCPolicy": webhook.KindOther,
		"Unconfirmed": webhook.KindOther, "TemplateRenderingFailed": webhook.KindOther, "SMTPApiError": webhook.KindOther,
		"ChallengeVerification": webhook.KindOther, "VirusNotification": webhook.KindOther, "SomethingNew": webhook.KindOther,
	}
	for typ, kind := range tests {
		body := withField(t, fixture(t, "postmark/bounce.json"), typ, "Type")
		b, err := p.Parse(context.Background(), postmarkHeader("digest-hook", "s3cret-Pa55"), body, testNow)
		if err != nil {
			t.Fatal(err)
		}
		if b.Events[0].Kind != kind {
			t.Errorf("%s: %s, want %s", typ, b.Events[0].Kind, kind)
		}
	}
}

func TestPostmarkRefuses(t *testing.T) {
	t.Parallel()
	p := newPostmark(t)
	body := fixture(t, "postmark/bounce.json")
	tests := []struct {
		name   string
		header http.Header
		body   []byte
		err    error
	}{
		{"no credentials", jsonHeader(), body, webhook.ErrSignature},
		{"wrong password", postmarkHeader("digest-hook", "s3cret-Pa56"), body, webhook.ErrSignature},
		{"wrong user", postmarkHeader("digest-hoo", "s3cret-Pa55"), body, webhook.ErrSignature},
		{"password as user", postmarkHeader("s3cret-Pa55", "digest-hook"), body, webhook.ErrSignature},
		{"form", func() http.Header {
			h := postmarkHeader("digest-hook", "s3cret-Pa55")
			h.Set("Content-Type", "application/x-www-form-urlencoded")
			return h
		}(), body, webhook.ErrContentType},
		{"not JSON", postmarkHeader("digest-hook", "s3cret-Pa55"), []byte("{"), webhook.ErrPayload},
		{"bad time", postmarkHeader("digest-hook", "s3cret-Pa55"), withField(t, body, "yesterday", "BouncedAt"), webhook.ErrPayload},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := p.Parse(context.Background(), tt.header, tt.body, testNow)
			checkErr(t, err, tt.err, "s3cret", "john@example.com")
		})
	}
}

func TestNewPostmarkRefusesMalformedCredentials(t *testing.T) {
	t.Parallel()
	for _, c := range []string{"", " \n", "hunter2", ":hunter2", "hunter2:", "hun ter:hunter2", "user:hun\tter2"} {
		_, err := webhook.NewPostmark([]byte(c))
		if err == nil {
			t.Fatalf("%q accepted", c)
		}
		if strings.Contains(err.Error(), "hunter") || strings.Contains(err.Error(), "hun ter") {
			t.Errorf("error %q quotes the credentials", err)
		}
	}
	if s := fmt.Sprintf("%#v", newPostmark(t)); s != "webhook.Postmark{credentials hidden}" {
		t.Errorf("%%#v shows %s", s)
	}
}

// Distinct records get distinct IDs, and the same record the same ID, so
// the intake can drop a redelivery.
func TestPostmarkEventIDs(t *testing.T) {
	t.Parallel()
	p := newPostmark(t)
	ids := map[string]string{}
	for _, name := range []string{"bounce", "spam-complaint", "delivery", "subscription-change"} {
		for range 2 {
			b, err := p.Parse(context.Background(), postmarkHeader("digest-hook", "s3cret-Pa55"), fixture(t, "postmark/"+name+".json"), testNow)
			if err != nil {
				t.Fatal(err)
			}
			id := b.Events[0].ID
			if prev, ok := ids[id]; ok && prev != name {
				t.Errorf("%s and %s share id %s", prev, name, id)
			}
			ids[id] = name
		}
	}
	if len(ids) != 4 {
		t.Errorf("ids %v: want one per record", ids)
	}
}
