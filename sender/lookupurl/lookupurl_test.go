package lookupurl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/weeklydigest/digest/sender/events"
	"github.com/weeklydigest/digest/sender/lookupurl"
)

func TestParseLookupURL(t *testing.T) {
	t.Parallel()
	cases := []struct {
		url, token string
		wantNil    bool
		wantErr    bool
	}{
		{url: "", wantNil: true},
		{url: "mailpit+http://127.0.0.1:8025"},
		{url: "mailpit+https://mail.example.com/mailpit/"},
		{url: "mailpit+http://user:pw@127.0.0.1:8025"},
		{url: "postmark+https://api.postmarkapp.com", token: "t"},
		{url: "postmark+https://api.postmarkapp.com", wantErr: true},
		{url: "postmark+https://tok:en@api.postmarkapp.com", token: "t", wantErr: true},
		{url: "postmark+http://api.postmarkapp.com", token: "t", wantErr: true},
		{url: "mailpit://127.0.0.1:8025", wantErr: true},
		{url: "sendgrid+https://api.sendgrid.com", wantErr: true},
		{url: "mailpit+http://", wantErr: true},
		{url: "mailpit+http://h:1?x=1", wantErr: true},
		{url: "::not a url", wantErr: true},
	}
	for _, c := range cases {
		l, err := lookupurl.Parse(c.url, lookupurl.Config{PostmarkToken: c.token})
		switch {
		case c.wantErr:
			if err == nil || !errors.Is(err, lookupurl.ErrURL) {
				t.Errorf("Parse(%q) = %v, %v; want ErrURL", c.url, l, err)
			}
			if err != nil && strings.Contains(err.Error(), "en@") {
				t.Errorf("error %q echoes credentials", err)
			}
		case c.wantNil:
			if l != nil || err != nil {
				t.Errorf("Parse(%q) = %v, %v; want nil, nil", c.url, l, err)
			}
		case err != nil || l == nil:
			t.Errorf("Parse(%q) = %v, %v; want a lookup", c.url, l, err)
		}
	}
}

func TestParseEventsURL(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"events:", "events://ses", "events:SES", "events:a/b", "events:" + string(make([]byte, 40))} {
		if _, err := lookupurl.Parse(bad, lookupurl.Config{}); !errors.Is(err, lookupurl.ErrURL) {
			t.Errorf("Parse(%q) = %v; want ErrURL", bad, err)
		}
	}
	l, err := lookupurl.Parse("events:sendgrid", lookupurl.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if ev, ok := l.(*events.Lookup); !ok || ev.Provider() != "sendgrid" {
		t.Fatalf("Parse(events:sendgrid) = %#v", l)
	}
}
