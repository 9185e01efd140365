package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
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
	// The command name, field 2, is in parentheses and may hold spaces
	// and parentheses itself: the fields after it follow the last ')'.
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return 0, errors.New("bench: unreadable /proc stat")
	}
	fields := strings.Fields(string(data[end+1:]))
	// fields[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return 0, errors.New("bench: short /proc stat")
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("bench: /proc stat: %w", err)
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// procMemory reads a process's resident set (VmRSS) and its peak since start
// or the last resetPeak (VmHWM), in bytes.
func procMemory(pid int) (rss, peak int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("bench: /proc status %s: %w", key, err)
		}
		if key == "VmRSS" {
			rss = kb << 10
		} else {
			peak = kb << 10
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if rss == 0 || peak == 0 {
		return 0, 0, errors.New("bench: no VmRSS or VmHWM in /proc status")
	}
	return rss, peak, nil
}

// idleMemory starts a process's peak window: it resets its VmHWM (hwm
// reports whether the kernel allowed it), then reads its resident set as
// the idle one. In that order the peak read later is never below the idle
// one, even when the process gave memory back in between.
func idleMemory(pid int) (idle int64, hwm bool, err error) {
	hwm = resetPeak(pid) == nil
	idle, _, err = procMemory(pid)
	return idle, hwm, err
}

// resetPeak sets a process's VmHWM back to its current VmRSS (Linux 4.0 and
// later), so that the peak measured next excludes start-up.
func resetPeak(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// cpuModel is the first "model name" of /proc/cpuinfo, or "" where there is
// none.
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(data)) {
		key, value, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(key) == "model name" {
			return strings.TrimSpace(value)
		}
	}
	return ""
}

// loadAverage is the one-minute load average of /proc/loadavg, or -1 where
// there is none.
func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	first, _, _ := strings.Cut(string(data), " ")
	load, err := strconv.ParseFloat(first, 64)
	if err != nil {
		return -1
	}
	return load
}
