package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat's CPU times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// processCPU returns the user plus system CPU time this process used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// backendCPU returns the CPU time used so far by the PostgreSQL backends
// pids, when the server runs on this machine (zero otherwise): the run's
// own connections, not other clients' nor the server's background writers.
func backendCPU(pids []uint32) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		sum += procCPU(pid, "postgres")
	}
	return sum
}

// procCPU returns the user plus system CPU time process pid used so far,
// from /proc/PID/stat; zero when it is gone or, with comm set, when its
// command name is another (a pid reused).
func procCPU(pid uint32, comm string) time.Duration {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(int(pid)), "stat"))
	if err != nil {
		return 0
	}
	s := string(b)
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < open || comm != "" && s[open+1:close] != comm {
		return 0
	}
	f := strings.Fields(s[close+1:])
	if len(f) < 13 { // fields 14 and 15 of stat: utime, stime
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * time.Second / clockTicks
}
