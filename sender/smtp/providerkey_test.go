package smtp_test

import (
	"bytes"
	"encoding/json"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/sender"
	"github.com/weeklydigest/digest/sender/smtp"
	"github.com/weeklydigest/digest/webhook"
)

// The key reaches SendGrid, Mailgun and SES under the names their webhooks
// report it back by, and package webhook reads it from there.
func TestProviderKeyHeaders(t *testing.T) {
	t.Parallel()
	hex := strings.Repeat("0123456789abcdef", 4)
	for _, tt := range []struct {
		key    digest.Key
		sesTag bool
	}{
		{digest.Key("K_2026-a:" + hex), true},
		{digest.Key("Kid.2026:" + hex), false}, // '.' is not allowed in an SES tag
	} {
		msg := &digest.Message{Key: tt.key, To: digest.Address{Email: "ada@example.net"}, Subject: "s", Text: "t"}
		data, err := smtp.DotWriterData(digest.Address{Email: "digest@example.com"}, "", msg, time.Unix(0, 0), true)
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := mail.ReadMessage(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		h := parsed.Header

		var api struct {
			UniqueArgs map[string]string `json:"unique_args"`
		}
		if err := json.Unmarshal([]byte(h.Get(sender.HeaderSendGridAPI)), &api); err != nil || api.UniqueArgs[webhook.CustomArg] != string(tt.key) {
			t.Errorf("%s = %q (%v): want unique_args.%s", sender.HeaderSendGridAPI, h.Get(sender.HeaderSendGridAPI), err, webhook.CustomArg)
		}
		var vars map[string]string
		if err := json.Unmarshal([]byte(h.Get(sender.HeaderMailgunVariables)), &vars); err != nil || vars[webhook.CustomArg] != string(tt.key) {
			t.Errorf("%s = %q (%v)", sender.HeaderMailgunVariables, h.Get(sender.HeaderMailgunVariables), err)
		}
		tags := h.Get(sender.HeaderSESTags)
		name, value, _ := strings.Cut(tags, "=")
		if !tt.sesTag {
			if tags != "" {
				t.Errorf("%s = %q for a key id with '.'", sender.HeaderSESTags, tags)
			}
		} else if name != webhook.TagName || webhook.KeyFromTag(value) != tt.key {
			t.Errorf("%s = %q: want %s=<tag of the key>", sender.HeaderSESTags, tags, webhook.TagName)
		}
		if h.Get(sender.HeaderKey) != string(tt.key) || sender.HeaderKey != webhook.HeaderKey {
			t.Errorf("%s = %q", sender.HeaderKey, h.Get(sender.HeaderKey))
		}
	}
}
