package local

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// procStat is what the supervisor reads of /proc/<pid>/stat.
type procStat struct {
	state     byte   // field 3: R, S, D, Z, ...
	pgrp      int    // field 5
	startTime uint64 // field 22: start time in clock ticks after boot
}

// readProcStat reads /proc/<pid>/stat; the error wraps os.ErrNotExist when there is no
// such process.
func readProcStat(pid int) (procStat, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, fmt.Errorf("read process %d status: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may itself hold spaces and ')'.
	s := string(data)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return procStat{}, fmt.Errorf("process %d status %q: no command name", pid, s)
	}
	fields := strings.Fields(s[end+1:]) // fields[0] is field 3
	if len(fields) < 20 || len(fields[0]) != 1 {
		return procStat{}, fmt.Errorf("process %d status: %d fields after the command name, want at least 20", pid, len(fields))
	}
	pgrp, err := strconv.Atoi(fields[2])
	if err != nil {
		return procStat{}, fmt.Errorf("process %d status: process group: %w", pid, err)
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("process %d status: start time: %w", pid, err)
	}
	return procStat{state: fields[0][0], pgrp: pgrp, startTime: start}, nil
}

// processAlive reports whether pid is still the process that started at startTime and has
// not exited (a zombie has exited). Errors other than "no such process" are returned with
// alive true, so an unreadable /proc never makes a live worker look dead.
func processAlive(pid int, startTime uint64) (bool, error) {
	st, err := readProcStat(pid)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	case err != nil:
		return true, err
	}
	return st.startTime == startTime && st.state != 'Z' && st.state != 'X', nil
}

// signalGroup sends sig to the process group led by pid, or to pid alone when it is not a
// group leader any more (a worker that moved itself to another group). ESRCH is not an error.
func signalGroup(pid int, sig syscall.Signal) error {
	if pid <= 0 {
		// kill(0) and kill(-1) would signal the supervisor's own group or every process.
		return fmt.Errorf("send %v to process group %d: not a worker's pid", sig, pid)
	}
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		err = syscall.Kill(pid, sig)
	}
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("send %v to process group %d: %w", sig, pid, err)
	}
	return nil
}

// findMarked finds the worker process whose environment holds WorkerMarkerEnv=marker by
// reading /proc/<pid>/environ of every process (those of other users are unreadable and
// skipped). The worker leads its own process group; its descendants inherit the marker but
// not the leadership, and among several leaders carrying it the earliest started is the
// worker. found is false when no live process carries the marker.
func findMarked(marker string) (pid int, startTime uint64, found bool, err error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0, false, fmt.Errorf("list processes: %w", err)
	}
	want := []byte(WorkerMarkerEnv + "=" + marker)
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil || p <= 0 {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !slices.ContainsFunc(bytes.Split(env, []byte{0}), func(v []byte) bool { return bytes.Equal(v, want) }) {
			continue
		}
		st, err := readProcStat(p)
		if err != nil || st.pgrp != p || st.state == 'Z' || st.state == 'X' {
			continue
		}
		if !found || st.startTime < startTime || (st.startTime == startTime && p < pid) {
			pid, startTime, found = p, st.startTime, true
		}
	}
	return pid, startTime, found, nil
}

// freePorts returns n distinct free loopback TCP ports, none of them in used. The ports are
// free when returned; a worker binds them shortly after (another program may take one in
// between, which the worker then reports by failing to start).
func freePorts(n int, used map[int]bool) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries > 100 {
			return nil, fmt.Errorf("allocate %d loopback ports: gave up after %d tries", n, tries)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("allocate a loopback port: %w", err)
		}
		listeners = append(listeners, l)
		p := l.Addr().(*net.TCPAddr).Port
		if !used[p] {
			ports = append(ports, p)
		}
	}
	return ports, nil
}

// child is a worker process started by this supervisor: it is reaped by a goroutine
// blocked in Wait, which closes done when the process has exited.
type child struct {
	done  chan struct{}
	state *os.ProcessState // set before done is closed
	err   error
}

// exited reports whether the child has exited (and been reaped).
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// status describes how the child ended.
func (c *child) status() string {
	if c.state != nil {
		return c.state.String()
	}
	if c.err != nil {
		return c.err.Error()
	}
	return "unknown"
}

// spawn starts argv in its own process group (so a signal to the group reaches the worker's
// own children, and a Ctrl-C aimed at the supervisor's group does not reach the workers),
// with stdout and stderr appended to logPath. The process is not tied to the supervisor: it
// keeps running when the supervisor exits. It returns the process's start time (field 22 of
// /proc/<pid>/stat, read before the process can be reaped). onExit runs after the process has
// been reaped.
func spawn(argv, env []string, logPath string, onExit func()) (*exec.Cmd, *child, uint64, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, nil, 0, fmt.Errorf("create log folder: %w", err)
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("open worker log: %w", err)
	}
	defer logFile.Close() // the child holds its own descriptor
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, nil, 0, fmt.Errorf("start %q: %w", argv[0], err)
	}
	// Not reaped before Wait, so /proc/<pid>/stat exists (possibly as a zombie).
	st, statErr := readProcStat(cmd.Process.Pid)
	c := &child{done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		c.state, c.err = cmd.ProcessState, err
		close(c.done)
		onExit()
	}()
	if statErr != nil {
		_ = signalGroup(cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
		return nil, nil, 0, fmt.Errorf("started %q but cannot identify it: %w", argv[0], statErr)
	}
	return cmd, c, st.startTime, nil
}
