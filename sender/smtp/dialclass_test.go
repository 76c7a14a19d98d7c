package smtp_test

import (
	"strings"
	"testing"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/sender/smtp"
)

// A session that no retry can open is ClassFatal with its kind (TLS
// required but not offered, AUTH unavailable, unknown host); a server that
// is down is temporary, of kind digest.KindConnect. Sends and checks say
// the same.
func TestDialFailuresAreClassified(t *testing.T) {
	t.Parallel()
	srv := startSMTP(t, fault{}) // no STARTTLS, no AUTH
	for _, tc := range []struct {
		name, url string
		class     digest.SendClass
		kind      string
	}{
		{"starttls", "smtp://" + srv.addr + "?tls=mandatory", digest.SendFatal, "starttls"},
		{"auth", "smtp://user:pw@" + srv.addr + "?tls=none&auth=plain", digest.SendFatal, "auth"},
		{"dns", "smtp://no-such-host.invalid:25?tls=none", digest.SendFatal, "dns"},
		{"down", "smtp://127.0.0.1:1?tls=none", digest.SendTemporary, digest.KindConnect},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := checkConfig(t, tc.url)
			err := smtp.CheckConnection(ctxT(t), cfg)
			if digest.SendClassOf(err) != tc.class || digest.KindOf(err) != tc.kind {
				t.Fatalf("Check = %v (class %s, kind %q), want %s %q", err, digest.SendClassOf(err), digest.KindOf(err), tc.class, tc.kind)
			}
			m, err := smtp.NewMailer(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			_, err = m.Send(ctxT(t), &digest.Message{Key: digest.Key("k1:" + strings.Repeat("0", 64)), To: digest.Address{Email: "a@example.com"}, Subject: "s", Text: "t"})
			if digest.SendClassOf(err) != tc.class || digest.KindOf(err) != tc.kind {
				t.Fatalf("Send = %v, want %s %q", err, tc.class, tc.kind)
			}
		})
	}
	if n := len(srv.messages()); n != 0 {
		t.Fatalf("the server received %d messages", n)
	}
}
