package httpapi_test

import (
	"testing"
	"time"

	"github.com/weeklydigest/digest/sender/internal/httpapi"
)

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 8, 10, 7, 0, 0, 0, time.UTC)
	cases := []struct {
		in     string
		want   time.Time
		wantOK bool
	}{
		{"120", now.Add(2 * time.Minute), true},
		{" 0 ", now, true},
		{"Mon, 10 Aug 2026 07:05:00 GMT", now.Add(5 * time.Minute), true},
		{"Mon, 10 Aug 2026 06:00:00 GMT", now, true},
		{"", time.Time{}, false},
		{"-5", time.Time{}, false},
		{"soon", time.Time{}, false},
	}
	for _, c := range cases {
		got, ok := httpapi.RetryAfter(c.in, now)
		if ok != c.wantOK || !got.Equal(c.want) {
			t.Errorf("RetryAfter(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.wantOK)
		}
	}
}
