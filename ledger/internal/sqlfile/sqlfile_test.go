package sqlfile

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestParse(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"a.sql": {Data: []byte("-- What these are.\n\n-- name: One\nSELECT 1;\n\n-- name: Two\n-- about two\nSELECT\n    2\n")},
		"b.sql": {Data: []byte("-- name: Three\nSELECT 3\n")},
	}
	s, err := Parse(fsys)
	if err != nil {
		t.Fatal(err)
	}
	want := Set{"One": "SELECT 1", "Two": "SELECT\n    2", "Three": "SELECT 3"}
	if len(s) != len(want) {
		t.Fatalf("got %d statements %q, want %d", len(s), s, len(want))
	}
	for k, v := range want {
		if s.Get(k) != v {
			t.Errorf("%s = %q, want %q", k, s[k], v)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	for name, text := range map[string]string{
		"twice":       "-- name: A\nSELECT 1\n-- name: A\nSELECT 2\n",
		"empty":       "-- name: A\n\n-- name: B\nSELECT 2\n",
		"no name":     "-- name:\nSELECT 1\n",
		"before name": "SELECT 1\n-- name: A\nSELECT 2\n",
	} {
		if _, err := Parse(fstest.MapFS{"x.sql": {Data: []byte(text)}}); err == nil {
			t.Errorf("%s: parsed %q", name, text)
		}
	}
}

func TestGetPanicsOnAMissingName(t *testing.T) {
	t.Parallel()
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "Nope") {
			t.Fatalf("recovered %v, want a panic naming the statement", r)
		}
	}()
	Set{}.Get("Nope")
}
