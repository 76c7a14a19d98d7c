package main

import (
	"runtime/debug"
	"testing"
)

// Unset, GOGC becomes gcPercent; set, it is left as the runtime read it.
func TestDefaultGC(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)

	defaultGC(func(string) string { return "" })
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Errorf("GOGC unset: GC percent %d, want %d", got, gcPercent)
	}
	defaultGC(func(k string) string {
		if k == "GOGC" {
			return "100"
		}
		return ""
	})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC=100: GC percent %d, want it left at 100", got)
	}
}
