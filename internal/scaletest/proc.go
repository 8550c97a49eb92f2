package scaletest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat and /proc/stat (USER_HZ, which
// Linux reports as 100 on every architecture Go supports, whatever the kernel's HZ).
const userHZ = 100

// ProcUsage is one reading of a process's CPU time and memory.
type ProcUsage struct {
	// CPUSeconds is user plus system CPU time since the process started.
	CPUSeconds float64
	// RSSBytes is the resident set size now (VmRSS), PeakRSSBytes its high-water mark (VmHWM).
	RSSBytes, PeakRSSBytes int64
	// Threads is the number of OS threads.
	Threads int
}

// ReadProc reads a process's usage from /proc/<pid>/stat and /proc/<pid>/status.
func ReadProc(pid int) (ProcUsage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcUsage{}, fmt.Errorf("read process %d: %w", pid, err)
	}
	cpu, err := ParseStatCPU(stat)
	if err != nil {
		return ProcUsage{}, fmt.Errorf("process %d: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcUsage{}, fmt.Errorf("read process %d: %w", pid, err)
	}
	u := ProcUsage{CPUSeconds: cpu}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(val)
		if len(fields) == 0 {
			continue
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		switch key {
		case "VmRSS":
			u.RSSBytes = n << 10
		case "VmHWM":
			u.PeakRSSBytes = n << 10
		case "Threads":
			u.Threads = int(n)
		}
	}
	return u, nil
}

// ParseStatCPU returns utime + stime, in seconds, from the contents of /proc/<pid>/stat.
// The command name (field 2) may hold spaces and parentheses, so the fields are counted from
// the last closing parenthesis.
func ParseStatCPU(stat []byte) (float64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc stat %q", truncate(string(stat), 80))
	}
	// After the name: field 3 (state) is rest[0]; utime (14) and stime (15) are rest[11], rest[12].
	rest := strings.Fields(string(stat[i+1:]))
	if len(rest) < 13 {
		return 0, fmt.Errorf("malformed /proc stat: %d fields after the command name", len(rest))
	}
	utime, err1 := strconv.ParseInt(rest[11], 10, 64)
	stime, err2 := strconv.ParseInt(rest[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("malformed /proc stat utime %q stime %q", rest[11], rest[12])
	}
	return float64(utime+stime) / userHZ, nil
}

// MachineUsage is one reading of the whole machine's CPU time (/proc/stat) and load.
type MachineUsage struct {
	// BusySeconds and TotalSeconds are summed over all CPUs since boot: busy excludes idle
	// and iowait.
	BusySeconds, TotalSeconds float64
	// Load1 is the one-minute load average.
	Load1 float64
	// IOSomeSeconds and IOFullSeconds are the time, since boot, during which some (or all)
	// runnable tasks were stalled waiting for I/O (/proc/pressure/io; 0 without PSI).
	IOSomeSeconds, IOFullSeconds float64
}

// ReadMachine reads /proc/stat's aggregate cpu line and /proc/loadavg.
func ReadMachine() (MachineUsage, error) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return MachineUsage{}, fmt.Errorf("read /proc/stat: %w", err)
	}
	m, err := ParseMachineStat(stat)
	if err != nil {
		return m, err
	}
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(la)); len(f) > 0 {
			m.Load1, _ = strconv.ParseFloat(f[0], 64)
		}
	}
	if psi, err := os.ReadFile("/proc/pressure/io"); err == nil {
		m.IOSomeSeconds, m.IOFullSeconds = ParsePressure(psi)
	}
	return m, nil
}

// ParsePressure reads the "some" and "full" stall totals of a /proc/pressure file, in
// seconds.
func ParsePressure(psi []byte) (some, full float64) {
	for _, line := range strings.Split(string(psi), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		for _, kv := range f[1:] {
			if v, ok := strings.CutPrefix(kv, "total="); ok {
				us, err := strconv.ParseFloat(v, 64)
				if err != nil {
					continue
				}
				switch f[0] {
				case "some":
					some = us / 1e6
				case "full":
					full = us / 1e6
				}
			}
		}
	}
	return some, full
}

// ParseMachineStat reads the aggregate "cpu" line of /proc/stat.
func ParseMachineStat(stat []byte) (MachineUsage, error) {
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 6 || f[0] != "cpu" {
		return MachineUsage{}, fmt.Errorf("malformed /proc/stat cpu line %q", truncate(string(line), 80))
	}
	var m MachineUsage
	// user nice system idle iowait irq softirq steal (guest times are inside user and nice).
	for i, s := range f[1:min(len(f), 9)] {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return MachineUsage{}, fmt.Errorf("malformed /proc/stat cpu line %q: %w", truncate(string(line), 80), err)
		}
		v /= userHZ
		m.TotalSeconds += v
		if i != 3 && i != 4 {
			m.BusySeconds += v
		}
	}
	return m, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
