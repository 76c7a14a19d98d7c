// Command digest sends every customer one weekly account-activity digest by
// email, and never the same digest twice. Run "digest --help".
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"
	_ "time/tzdata" // the zones of DIGEST_TZ, also in a minimal image
)

func main() {
	defaultGC(os.Getenv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:], &Env{
		Getenv: os.Getenv,
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		Now:    time.Now,
	})
	stop()
	os.Exit(code)
}

// gcPercent is the garbage collector's target when GOGC is unset: the heap
// may grow to three times what is live between collections, not two. A
// run's live heap is flat (about 14 MiB, whatever the week's size), so this
// buys 5-8% less CPU per digest for about 8 MiB more peak RSS (about 53
// MiB at a million customers; docs/benchmarks.md). GOGC, and GOMEMLIMIT,
// still rule when set.
const gcPercent = 200

// defaultGC sets the collector's target to gcPercent unless GOGC is set.
func defaultGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
}
