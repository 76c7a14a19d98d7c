package sender

import "strings"

// Clip keeps echoed user input short and printable: at most 32 bytes and
// an ellipsis, white space and control characters as '?'. Errors that
// quote a URL's part, a provider's reply or an address go through it.
func Clip(s string) string {
	if len(s) > 32 {
		s = s[:32] + "…"
	}
	return strings.Map(func(r rune) rune {
		if isSpaceOrControl(r) {
			return '?'
		}
		return r
	}, s)
}
