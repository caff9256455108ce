package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's CPU times (100 on
// every Linux this runs on).
const clockTicks = 100

// cpuSeconds is the CPU time process pid has used so far (user + system); 0 if unknown.
func cpuSeconds(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command (which may hold spaces) start after the last ')'.
	fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / clockTicks
}

// apiServerPID finds this run's kube-apiserver: the one writing this run's audit log.
func (b *bench) apiServerPID() int {
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, path := range cmdlines {
		raw, err := os.ReadFile(path)
		if err != nil || !bytes.Contains(raw, []byte("kube-apiserver")) || !bytes.Contains(raw, []byte(b.audit)) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		return pid
	}
	return 0
}

// cpuShares measures, over a window, the CPU the API server, the operator and this
// process (holders, client-go's candidates, the observer) use, in cores. On a shared
// machine they compete: a side whose renewals cost more CPU elsewhere leaves the API
// server less.
type cpuShares struct {
	pids  [3]int
	start [3]float64
	at    time.Time
}

func (b *bench) startCPU() *cpuShares {
	c := &cpuShares{pids: [3]int{b.apiServerPID(), b.op.Cmd.Process.Pid, os.Getpid()}, at: time.Now()}
	for i, pid := range c.pids {
		c.start[i] = cpuSeconds(pid)
	}
	return c
}

// String is "API server x, operator y, benchmark z cores" since startCPU.
func (c *cpuShares) String() string {
	elapsed := time.Since(c.at).Seconds()
	var used [3]float64
	for i, pid := range c.pids {
		used[i] = (cpuSeconds(pid) - c.start[i]) / elapsed
	}
	return fmt.Sprintf("API server %.2f, operator %.2f, benchmark process %.2f cores", used[0], used[1], used[2])
}
