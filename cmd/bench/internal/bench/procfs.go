package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/detourhq/detour/internal/wait"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// which Linux fixes at 100 for every architecture it exports it on.
const clockTick = 10 * time.Millisecond

// procCPU is the CPU time (user and system, every thread) a live process has
// used, from /proc/<pid>/stat, to the clock tick.
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, may hold spaces and parentheses: the
	// fields after it follow the last ')', starting at field 3, and utime
	// and stime are fields 14 and 15.
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	var utime, stime int64
	if len(fields) < 13 {
		return 0, errors.New("bench: short /proc stat")
	}
	if _, err := fmt.Sscan(fields[11]+" "+fields[12], &utime, &stime); err != nil {
		return 0, fmt.Errorf("bench: /proc stat: %w", err)
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// procMemory reads a process's resident set (VmRSS) and its peak since start
// or the last resetPeak (VmHWM), in bytes.
func procMemory(pid int) (rss, peak int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.Lines(string(data)) {
		var kb int64
		if _, err := fmt.Sscanf(line, "VmRSS: %d kB", &kb); err == nil {
			rss = kb << 10
		} else if _, err := fmt.Sscanf(line, "VmHWM: %d kB", &kb); err == nil {
			peak = kb << 10
		}
	}
	if rss == 0 || peak == 0 {
		return 0, 0, errors.New("bench: no VmRSS or VmHWM in /proc status")
	}
	return rss, peak, nil
}

// idleMemory lets a process settle for memorySettle and starts its peak
// window: it resets its VmHWM to its VmRSS (Linux 4.0 and later; hwm
// reports whether the kernel allowed it), so that the peak measured next
// excludes start-up, then reads its resident set as the idle one. In that
// order the peak read later is never below the idle one, even when the
// process gave memory back in between.
func idleMemory(ctx context.Context, pid int) (idle int64, hwm bool, err error) {
	if err := wait.Sleep(ctx, memorySettle); err != nil {
		return 0, false, err
	}
	hwm = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil
	if idle, _, err = procMemory(pid); err != nil {
		return 0, false, fmt.Errorf("reading the idle resident set: %w", err)
	}
	return idle, hwm, nil
}

// samplePeak is the higher of peak and the process's resident set now, or
// its VmHWM when hwm says its peak was reset.
func samplePeak(pid int, hwm bool, peak int64) (int64, error) {
	rss, high, err := procMemory(pid)
	if hwm {
		rss = max(rss, high)
	}
	return max(peak, rss), err
}

// cpuModel is the first "model name" of /proc/cpuinfo, or "" where there is
// none.
func cpuModel() string {
	data, _ := os.ReadFile("/proc/cpuinfo")
	for line := range strings.Lines(string(data)) {
		if key, value, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(key) == "model name" {
			return strings.TrimSpace(value)
		}
	}
	return ""
}

// loadAverage is the one-minute load average of /proc/loadavg, or -1 where
// there is none.
func loadAverage() float64 {
	data, _ := os.ReadFile("/proc/loadavg")
	first, _, _ := strings.Cut(string(data), " ")
	if load, err := strconv.ParseFloat(first, 64); err == nil {
		return load
	}
	return -1
}
