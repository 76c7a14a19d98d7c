package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Issue 35: a push that fails names the Pushgateway with its user and the
// password masked, whether the URL parses or not.
func TestPushErrorsHideThePassword(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler()) // closed: nothing listens
	srv.Close()
	closed := srv.Listener.Addr().String()
	for _, url := range []string{"http://metrics:S3cretPW@" + closed, "http://metrics:S3cretPW@127.0.0.1:port"} {
		errs := map[string]error{
			"Push":          New().Push(context.Background(), url, nil, Label{"week", "2026-W48"}),
			"PushPrune":     PushPrune(context.Background(), url, nil, Prune{}),
			"PushWeekState": PushWeekState(context.Background(), url, nil, WeekState{Week: "2026-W48"}),
		}
		for name, err := range errs {
			if err == nil {
				t.Fatalf("%s to %s: no error", name, url)
			}
			if strings.Contains(err.Error(), "S3cretPW") {
				t.Errorf("%s: the error shows the password: %v", name, err)
			}
		}
	}
}
