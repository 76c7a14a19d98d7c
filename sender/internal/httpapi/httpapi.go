package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/sender"
)

// maxBody bounds how much of a provider's reply is read.
const maxBody = 4 << 20

// HTTPError is a provider API reply that was not 2xx. It travels inside a
// *digest.SendError whose class says what to do: temporary for 408, 429 and
// 5xx (RetryAt from Retry-After when given, zero otherwise: then use
// Backoff), permanent for the rest (a wrong token or URL does not fix
// itself).
type HTTPError struct {
	Op         string // what was asked, e.g. "postmark lookup"
	StatusCode int
	RetryAt    time.Time // from Retry-After, or zero
	Detail     string    // the start of the reply body, for the log
}

func (e *HTTPError) Error() string {
	s := fmt.Sprintf("%s: HTTP %d %s", e.Op, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// classifyHTTP turns a non-2xx reply into a *digest.SendError.
func classifyHTTP(op string, resp *http.Response, now time.Time) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	he := &HTTPError{Op: op, StatusCode: resp.StatusCode, Detail: sender.HeaderText(string(body))}
	class := digest.SendPermanent
	switch code := resp.StatusCode; {
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		class = digest.SendTemporary
		he.RetryAt, _ = RetryAfter(resp.Header.Get("Retry-After"), now)
	case code == http.StatusRequestTimeout || code >= 500:
		class = digest.SendTemporary
	}
	return &digest.SendError{Class: class, RetryAt: he.RetryAt, Throttled: resp.StatusCode == http.StatusTooManyRequests, Err: he}
}

// Client is one provider's API: what the look-ups of sender/mailpit and
// sender/postmark ask through.
type Client struct {
	Op     string // what is asked, for errors: "mailpit lookup"
	HTTP   *http.Client
	Now    func() time.Time // the clock for Retry-After dates
	Header http.Header      // added to every request; may hold a token, never logged
}

// GetJSON GETs url and decodes a 2xx JSON reply into v. Transport failures
// are temporary; non-2xx replies go through classifyHTTP. Errors never
// contain the request headers.
func (a *Client) GetJSON(ctx context.Context, url string, v any) error {
	return a.GetJSONUpTo(ctx, url, v, maxBody)
}

// GetJSONUpTo is GetJSON reading at most limit bytes of the reply.
func (a *Client) GetJSONUpTo(ctx context.Context, url string, v any, limit int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", a.Op, err)
	}
	req.Header.Set("Accept", "application/json")
	for k, vs := range a.Header {
		req.Header[k] = vs
	}
	resp, err := a.HTTP.Do(req)
	if err != nil {
		return Temporary(fmt.Errorf("%s: %w", a.Op, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return classifyHTTP(a.Op, resp, a.Now())
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" && !strings.Contains(ct, "json") {
		return Temporary(fmt.Errorf("%s: reply is %s, not JSON", a.Op, ct))
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, limit)).Decode(v); err != nil {
		return Temporary(fmt.Errorf("%s: decode reply: %w", a.Op, err))
	}
	return nil
}

// Temporary wraps err as a temporary failure.
func Temporary(err error) error {
	return &digest.SendError{Class: digest.SendTemporary, Err: err}
}
