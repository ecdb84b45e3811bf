// Package proc answers questions about local processes from /proc.
package proc

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Alive reports whether pid exists and is not a zombie (an exited child not yet reaped).
func Alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

// CommandLineContains reports whether pid's command line contains s.
func CommandLineContains(pid int, s string) bool {
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && strings.Contains(string(cmdline), s)
}
