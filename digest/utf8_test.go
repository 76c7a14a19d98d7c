package digest_test

import (
	"testing"

	"github.com/weeklydigest/digest/digest"
)

func TestASCIILocalPart(t *testing.T) {
	t.Parallel()
	for email, want := range map[string]bool{
		"ada@example.net":     true,
		"ada@bücher.example":  true,
		"jörg@example.com":    false,
		"jörg@bücher.example": false,
		"ｊorg@example.com":    false,
	} {
		if got := digest.ASCIILocalPart(email); got != want {
			t.Errorf("ASCIILocalPart(%q) = %v, want %v", email, got, want)
		}
	}
}
