package listen_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/weeklydigest/digest/internal/browsertest"
)

// A person opens the link in a real browser without JavaScript: the page
// is in their language and direction, its button is labelled, and
// clicking it lands the suppression in the ledger; opening the page alone
// recorded nothing.
func TestBrowserClicksThroughThePage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		accept, lang, dir, button, done string
	}{
		{"ar-BH,ar;q=0.9", "ar", "rtl", "إلغاء الاشتراك", "تم إلغاء اشتراكك"},
		{"de-DE,de;q=0.9", "de", "ltr", "Abbestellen", "Sie haben die Übersicht abbestellt"},
	} {
		t.Run(tc.lang, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, nil)
			ctx := browsertest.Open(t, tc.accept)
			customer := "cust_browser_" + tc.lang
			if err := chromedp.Do(ctx, chromedp.Navigate(w.url(customer)), chromedp.WaitVisible(chromedp.ID("unsubscribe"))); err != nil {
				t.Fatal(err)
			}
			html := browsertest.Run(t, ctx, chromedp.Attributes(chromedp.CSS("html")))
			button := browsertest.Run(t, ctx, chromedp.Attributes(chromedp.ID("unsubscribe")))
			label := strings.TrimSpace(browsertest.Run(t, ctx, chromedp.Text(chromedp.ID("unsubscribe"))))
			if html["lang"] != tc.lang || html["dir"] != tc.dir || label != tc.button || button["aria-describedby"] != "lead" || button["type"] != "submit" {
				t.Fatalf("page: html %v, button %v labelled %q; want lang %q dir %q, a submit button %q described by lead", html, button, label, tc.lang, tc.dir, tc.button)
			}
			if lead := browsertest.Run(t, ctx, chromedp.Text(chromedp.ID("lead"))); lead == "" {
				t.Fatal("the button's description is empty")
			}
			if list, _ := w.suppressed(customer); len(list) != 0 {
				t.Fatal("opening the page unsubscribed")
			}
			if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("unsubscribe")), chromedp.WaitNotPresent(chromedp.ID("unsubscribe"))); err != nil {
				t.Fatal(err)
			}
			if heading := strings.TrimSpace(browsertest.Run(t, ctx, chromedp.Text(chromedp.CSS("h1")))); heading != tc.done {
				t.Fatalf("after the click: %q; want %q", heading, tc.done)
			}
			list, _ := w.suppressed(customer)
			if len(list) != 1 || list[0].Source != "one-click" {
				t.Fatalf("after the click: %+v; want the customer suppressed by one-click", list)
			}
		})
	}
}
