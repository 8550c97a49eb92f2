package scaletest

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// Sample is one reading of the processes and the machine.
type Sample struct {
	At time.Time
	// Workers are the worker processes' readings, in worker order (zero after one exited).
	Workers []ProcUsage
	// Server is the dev server's reading.
	Server ProcUsage
	// Machine is the whole machine's.
	Machine MachineUsage
}

func numCPU() int { return runtime.NumCPU() }

// sample reads /proc every Sample period until ctx ends.
func (r *runner) sample(ctx context.Context) {
	t := time.NewTicker(r.o.Sample)
	defer t.Stop()
	for {
		s := Sample{At: time.Now()}
		for _, w := range r.workers {
			u, _ := ReadProc(w.cmd.Process.Pid)
			s.Workers = append(s.Workers, u)
		}
		s.Server, _ = ReadProc(r.server.cmd.Process.Pid)
		s.Machine, _ = ReadMachine()
		r.samplesMu.Lock()
		r.samples = append(r.samples, s)
		r.samplesMu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ProcStats summarise a process (or the workers together) over a window.
type ProcStats struct {
	// CPUCoresMean is the CPU time used in the window over its length (1.0: one core busy).
	CPUCoresMean float64 `json:"cpu_cores_mean"`
	// CPUCoresMax is the highest of the per-sample-period averages.
	CPUCoresMax float64 `json:"cpu_cores_max"`
	// RSSMaxMiB is the largest resident set seen in the window; RSSEndMiB the last.
	RSSMaxMiB float64 `json:"rss_max_mib"`
	RSSEndMiB float64 `json:"rss_end_mib"`
	// PeakRSSMiB is the process's own high-water mark (VmHWM) at the window's end, summed
	// over the workers: it includes the start of the planners, before the window.
	PeakRSSMiB float64 `json:"peak_rss_mib"`
	// Threads is the OS thread count at the window's end.
	Threads int `json:"threads"`
}

// MachineStats summarise the whole machine over a window: what else ran next to the test.
type MachineStats struct {
	NumCPU int `json:"num_cpu"`
	// BusyCoresMean is the machine's busy CPU time over the window's length.
	BusyCoresMean float64 `json:"busy_cores_mean"`
	// OtherCoresMean is BusyCoresMean minus the workers and the server: other work on the
	// machine, competing with the test.
	OtherCoresMean float64 `json:"other_cores_mean"`
	// Load1Max and Load1Mean are the one-minute load average's maximum and mean.
	Load1Max  float64 `json:"load1_max"`
	Load1Mean float64 `json:"load1_mean"`
	// IOSomePct and IOFullPct are the share of the window during which some (all) runnable
	// tasks waited for I/O (Linux PSI): disk contention, which a SQLite file feels first.
	IOSomePct float64 `json:"io_some_pct"`
	IOFullPct float64 `json:"io_full_pct"`
}

// ResourceStats are the processes' and the machine's use over a window.
type ResourceStats struct {
	// Workers are the worker processes together (CPU and memory summed).
	Workers ProcStats `json:"workers"`
	// Server is the Temporal dev server.
	Server  ProcStats    `json:"server"`
	Machine MachineStats `json:"machine"`
	// Samples is the number of readings in the window.
	Samples int `json:"samples"`
}

// Resources summarises the samples taken within [from, to].
func Resources(samples []Sample, from, to time.Time) ResourceStats {
	out := ResourceStats{Machine: MachineStats{NumCPU: numCPU()}}
	var in []Sample
	for _, s := range samples {
		if !s.At.Before(from) && !s.At.After(to) {
			in = append(in, s)
		}
	}
	out.Samples = len(in)
	if len(in) == 0 {
		return out
	}
	workers := func(s Sample) ProcUsage {
		var u ProcUsage
		for _, w := range s.Workers {
			u.CPUSeconds += w.CPUSeconds
			u.RSSBytes += w.RSSBytes
			u.PeakRSSBytes += w.PeakRSSBytes
			u.Threads += w.Threads
		}
		return u
	}
	server := func(s Sample) ProcUsage { return s.Server }
	out.Workers, out.Server = procStats(in, workers), procStats(in, server)
	first, last := in[0], in[len(in)-1]
	loadSum := 0.0
	for _, s := range in {
		loadSum += s.Machine.Load1
		out.Machine.Load1Max = max(out.Machine.Load1Max, s.Machine.Load1)
	}
	out.Machine.Load1Mean = loadSum / float64(len(in))
	if dt := last.At.Sub(first.At).Seconds(); dt > 0 {
		out.Machine.BusyCoresMean = (last.Machine.BusySeconds - first.Machine.BusySeconds) / dt
		out.Machine.OtherCoresMean = out.Machine.BusyCoresMean - out.Workers.CPUCoresMean - out.Server.CPUCoresMean
		out.Machine.IOSomePct = 100 * (last.Machine.IOSomeSeconds - first.Machine.IOSomeSeconds) / dt
		out.Machine.IOFullPct = 100 * (last.Machine.IOFullSeconds - first.Machine.IOFullSeconds) / dt
	}
	return out
}

const mib = 1 << 20

func procStats(in []Sample, get func(Sample) ProcUsage) ProcStats {
	var p ProcStats
	for i, s := range in {
		u := get(s)
		p.RSSMaxMiB = max(p.RSSMaxMiB, float64(u.RSSBytes)/mib)
		if i > 0 {
			prev := get(in[i-1])
			if dt := s.At.Sub(in[i-1].At).Seconds(); dt > 0 && u.CPUSeconds >= prev.CPUSeconds {
				p.CPUCoresMax = max(p.CPUCoresMax, (u.CPUSeconds-prev.CPUSeconds)/dt)
			}
		}
	}
	first, last := get(in[0]), get(in[len(in)-1])
	if dt := in[len(in)-1].At.Sub(in[0].At).Seconds(); dt > 0 {
		p.CPUCoresMean = (last.CPUSeconds - first.CPUSeconds) / dt
	}
	p.RSSEndMiB, p.PeakRSSMiB, p.Threads = float64(last.RSSBytes)/mib, float64(last.PeakRSSBytes)/mib, last.Threads
	return p
}

// writeSamples writes the samples as CSV: time, each worker's CPU seconds and RSS, the
// server's, the machine's busy CPU seconds and load.
func (r *runner) writeSamples(path string) error {
	r.samplesMu.Lock()
	defer r.samplesMu.Unlock()
	var b strings.Builder
	b.WriteString("unix_s")
	for i := range r.workers {
		fmt.Fprintf(&b, ",worker%d_cpu_s,worker%d_rss_mib", i+1, i+1)
	}
	b.WriteString(",server_cpu_s,server_rss_mib,machine_busy_cpu_s,load1,io_some_s,io_full_s\n")
	for _, s := range r.samples {
		fmt.Fprintf(&b, "%.3f", unix(s.At))
		for _, w := range s.Workers {
			fmt.Fprintf(&b, ",%.2f,%.1f", w.CPUSeconds, float64(w.RSSBytes)/mib)
		}
		fmt.Fprintf(&b, ",%.2f,%.1f,%.2f,%.2f,%.2f,%.2f\n", s.Server.CPUSeconds, float64(s.Server.RSSBytes)/mib, s.Machine.BusySeconds, s.Machine.Load1,
			s.Machine.IOSomeSeconds, s.Machine.IOFullSeconds)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("samples: %w", err)
	}
	return nil
}
