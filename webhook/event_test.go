package webhook_test

import (
	"testing"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/webhook"
)

func TestTagValue(t *testing.T) {
	t.Parallel()
	const hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, kid := range []string{"k1", "K_2", "a-b_c", "x"} {
		key := digest.Key(kid + ":" + hex)
		v, ok := webhook.TagValue(key)
		if !ok || v != kid+"_"+hex {
			t.Fatalf("%s: %q %v", key, v, ok)
		}
		for _, c := range v {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
				t.Errorf("%q: %q is not allowed in an SES tag", v, c)
			}
		}
		if got := webhook.KeyFromTag(v); got != key {
			t.Errorf("KeyFromTag(%q) = %q, want %q", v, got, key)
		}
	}
	if _, ok := webhook.TagValue(digest.Key("k.1:" + hex)); ok {
		t.Error("a key id with '.' has a tag form")
	}
	for _, v := range []string{"", "k1", "_" + hex, "k1-" + hex, "k1_" + hex[1:], "k1_" + hex + "0", "k!_" + hex, "k1_" + hex[:63] + "G"} {
		if got := webhook.KeyFromTag(v); got != "" {
			t.Errorf("KeyFromTag(%q) = %q", v, got)
		}
	}
}
