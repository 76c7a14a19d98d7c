// Package browsertest starts the headless Chromium the browser tests drive
// (chromedp): the unsubscribe page's own test in package listen, and the
// end-to-end test where a reader clicks through it.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// Chromium returns the headless Chromium to drive: $CHROMIUM_BIN, else
// chromium on PATH (Debian's package, which scripts/test installs). Under
// CI=true a missing browser fails the test: CI must run it. Under go test
// -short (make check) the test skips.
func Chromium(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Chromium: skipped under -short (make check); make test runs it")
	}
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

// Open opens a headless Chromium tab with JavaScript disabled, as a
// cautious reader's browser may be, and the given Accept-Language. The
// browser stops when the test ends.
func Open(t testing.TB, acceptLanguage string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(Chromium(t)),
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

// Run runs one action and fails the test on its error.
func Run[T any](t testing.TB, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
