package cgroup

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the times in /proc/PID/stat: clock ticks of
// 1/100 s on Linux, whatever the kernel's HZ.
const userHZ = 100

// ProcessCPU is the CPU time (user and system) process pid has used since
// it started, from /proc/PID/stat: all of it, in whichever cgroup it ran.
func ProcessCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	ticks, err := parseStatCPU(b)
	if err != nil {
		return 0, err
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// parseStatCPU reads fields 14 and 15 (utime, stime) of a /proc/PID/stat
// line; the command name (field 2) may hold blanks and parentheses, so
// the fields are counted from its last ')'.
func parseStatCPU(b []byte) (uint64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("not a /proc stat line: %q", b)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime is field 14, stime 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc stat line: %q", b)
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc stat line with bad times: %q", b)
	}
	return u + s, nil
}
