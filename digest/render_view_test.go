package digest

import "testing"

// The words newView takes from langWords' caches are the catalogue's: the
// greeting split around the name, the transaction counts translated once.
// And every shipped language takes the fast path.
func TestLangWordsCachesAreTheCatalogues(t *testing.T) {
	t.Parallel()
	r, err := NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	for _, lang := range Languages {
		w := r.words(lang)
		if w.helloName == nil {
			t.Errorf("%s: the greeting is translated per digest", lang)
		}
		for _, name := range []string{"", "Ada", "%s", "%d %!", "{0}", `<b>"Tom" & Jerry's</b>`, "Zoë Ærø 山田", "\u00a0x\u202e"} {
			if got, want := w.greeting(name), w.printer.Sprintf(msgHelloName, name); got != want {
				t.Errorf("%s: greeting(%q) = %q, the catalogue says %q", lang, name, got, want)
			}
		}
		for _, n := range []int{-1, 0, 1, 2, 5, 11, 21, maxCachedCount - 1, maxCachedCount, 1000} {
			if got, want := w.transactionCount(n), w.printer.Sprintf(msgTransactions, n); got != want {
				t.Errorf("%s: transactionCount(%d) = %q, the catalogue says %q", lang, n, got, want)
			}
		}
	}
}

func TestPadLeft(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		s     string
		width int
		want  string
	}{{"€1.00", 5, "€1.00"}, {"€1.00", 7, "  €1.00"}, {"", 2, "  "}, {"abc", 1, "abc"}, {"١٫٠٠", 6, "  ١٫٠٠"}} {
		if got := padLeft(tt.s, tt.width); got != tt.want {
			t.Errorf("padLeft(%q, %d) = %q, want %q", tt.s, tt.width, got, tt.want)
		}
	}
}
