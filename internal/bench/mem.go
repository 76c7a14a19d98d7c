package bench

import (
	"bufio"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// resetPeakRSS resets the kernel's VmHWM to the current RSS (Linux 4.0 and
// later: writing "5" to /proc/self/clear_refs), so that the peak read after
// the run is the run's own, not the seeding's or the plain loop's. It
// reports whether the reset took.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSS returns VmHWM from /proc/self/status in bytes, or -1.
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			return -1
		}
		return kb * 1024
	}
	return -1
}

const heapMetric = "/memory/classes/heap/objects:bytes"

// heapInUse returns the bytes of live and not yet swept heap objects:
// the Go heap in use. Reading a runtime/metrics sample does not stop the
// world, unlike runtime.ReadMemStats.
func heapInUse() uint64 {
	s := []metrics.Sample{{Name: heapMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// heapSampler keeps the peak of heapInUse, sampled every 50ms until stop.
type heapSampler struct {
	peak atomic.Uint64
	done chan struct{}
	quit chan struct{}
}

func sampleHeap() *heapSampler {
	h := &heapSampler{done: make(chan struct{}), quit: make(chan struct{})}
	go func() {
		defer close(h.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if v := heapInUse(); v > h.peak.Load() {
				h.peak.Store(v)
			}
			select {
			case <-t.C:
			case <-h.quit:
				return
			}
		}
	}()
	return h
}

func (h *heapSampler) stop() uint64 {
	close(h.quit)
	<-h.done
	return h.peak.Load()
}
