package unsubscribe

import (
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"strings"
)

// CheckOneClick checks a received message's headers against RFC 8058
// (section 3.1, what Gmail and Yahoo require of bulk senders): exactly one
// List-Unsubscribe, whose value is a comma-separated list of <URI>
// entries holding at least one https URI, and exactly one
// List-Unsubscribe-Post whose value is "List-Unsubscribe=One-Click". It
// returns the https URI. (RFC 8058 also wants a DKIM signature covering both
// headers; that is the signing relay's part, not checked here.)
func CheckOneClick(h mail.Header) (string, error) {
	lu, post := h["List-Unsubscribe"], h["List-Unsubscribe-Post"]
	if len(lu) != 1 {
		return "", fmt.Errorf("want one List-Unsubscribe header, have %d", len(lu))
	}
	if len(post) != 1 || strings.TrimSpace(post[0]) != "List-Unsubscribe=One-Click" {
		return "", fmt.Errorf("want one List-Unsubscribe-Post: List-Unsubscribe=One-Click, have %q", post)
	}
	var found string
	for _, e := range strings.Split(lu[0], ",") {
		e = strings.TrimSpace(e)
		if len(e) < 2 || e[0] != '<' || e[len(e)-1] != '>' || strings.ContainsAny(e[1:len(e)-1], "<> \t\r\n") {
			return "", fmt.Errorf("List-Unsubscribe entry %q is not one <URI>", e)
		}
		u, err := url.Parse(e[1 : len(e)-1])
		if err != nil {
			return "", fmt.Errorf("List-Unsubscribe entry %q: %v", e, err)
		}
		if u.Scheme == "https" && u.Host != "" && found == "" {
			found = u.String()
		}
	}
	if found == "" {
		return "", errors.New("List-Unsubscribe has no https URI, which one-click needs")
	}
	return found, nil
}
