package listen_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// chromium returns the headless Chromium to drive: $CHROMIUM_BIN, else
// chromium on PATH (Debian's package, which scripts/test installs). Under
// CI=true a missing browser fails the test: CI must run it.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM_BIN"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on PATH: scripts/test installs it (apt-get install chromium)")
	}
	t.Skip("no chromium on PATH (scripts/test installs it; under CI=true this fails)")
	return ""
}

// browser opens a headless Chromium tab with JavaScript disabled, as a
// cautious reader's browser may be, and the given Accept-Language.
func browser(t *testing.T, acceptLanguage string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // containers run the tests as root
	)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancel)
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
			return err
		}
		// The reader's languages, as their browser sends them.
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Accept-Language": acceptLanguage}})
		return err
	}))
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

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
			ctx := browser(t, tc.accept)
			customer := "cust_browser_" + tc.lang
			if err := chromedp.Do(ctx, chromedp.Navigate(w.url(customer)), chromedp.WaitVisible(chromedp.ID("unsubscribe"))); err != nil {
				t.Fatal(err)
			}
			html := run(t, ctx, chromedp.Attributes(chromedp.CSS("html")))
			button := run(t, ctx, chromedp.Attributes(chromedp.ID("unsubscribe")))
			label := strings.TrimSpace(run(t, ctx, chromedp.Text(chromedp.ID("unsubscribe"))))
			if html["lang"] != tc.lang || html["dir"] != tc.dir || label != tc.button || button["aria-describedby"] != "lead" || button["type"] != "submit" {
				t.Fatalf("page: html %v, button %v labelled %q; want lang %q dir %q, a submit button %q described by lead", html, button, label, tc.lang, tc.dir, tc.button)
			}
			if lead := run(t, ctx, chromedp.Text(chromedp.ID("lead"))); lead == "" {
				t.Fatal("the button's description is empty")
			}
			if list, _ := w.suppressed(customer); len(list) != 0 {
				t.Fatal("opening the page unsubscribed")
			}
			if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("unsubscribe")), chromedp.WaitNotPresent(chromedp.ID("unsubscribe"))); err != nil {
				t.Fatal(err)
			}
			if heading := strings.TrimSpace(run(t, ctx, chromedp.Text(chromedp.CSS("h1")))); heading != tc.done {
				t.Fatalf("after the click: %q; want %q", heading, tc.done)
			}
			list, _ := w.suppressed(customer)
			if len(list) != 1 || list[0].Source != "one-click" {
				t.Fatalf("after the click: %+v; want the customer suppressed by one-click", list)
			}
		})
	}
}

// run runs one action and fails the test on its error.
func run[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
