package profiler

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Result is the outcome of a profiling run.
type Result struct {
	// Options are the measured profiles, in the order of Config.Options.
	Options []OptionResult
	// Recommendation is the choice of options and the planner settings.
	Recommendation Recommendation
	// Files are the files written.
	Files []string
	// Elapsed is the run's wall time (measuring only; points reused from an earlier run
	// cost nothing).
	Elapsed time.Duration
	// Measured and Reused count the points measured by this run and taken from Dir/raw.
	Measured, Reused int
}

type runner struct {
	cfg   Config
	runID string
	seq   atomic.Uint64

	start          time.Time
	done, reused   int
	total          int // points of the options resolved so far, plus estimates
	resolved       int // points of the options resolved so far
	optionsPending int

	// Per kind of point (0 prefill, 1 decode), for the ETA: points expected (resolved
	// options plus estimates), points done, points measured and the time they took.
	kindTotal, kindDone, kindMeasured [2]int
	kindTime                          [2]time.Duration
	resolvedKind                      [2]int
	lastPoint                         time.Time
}

func (r *runner) nonce() string {
	return fmt.Sprintf("p%sx%d", r.runID, r.seq.Add(1))
}

// Run profiles every option of cfg, selects the best and writes the profile, the report
// and the recommended planner config to cfg.Dir. It returns an error wrapping ErrNoOption
// (after writing the measured data and the report) when no option meets the SLA.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "raw"), 0o755); err != nil {
		return nil, fmt.Errorf("profiler: %w", err)
	}
	r := &runner{cfg: cfg, runID: strconv.FormatInt(time.Now().UnixNano(), 36), start: time.Now(), optionsPending: len(cfg.Options)}
	res := &Result{}
	for _, o := range cfg.Options {
		or, err := r.profileOption(ctx, o)
		if err != nil {
			return nil, err
		}
		res.Options = append(res.Options, *or)
		r.optionsPending--
	}
	res.Elapsed = time.Since(r.start)
	res.Measured, res.Reused = r.done-r.reused, r.reused
	fmt.Fprintf(cfg.Progress, "profiled %d option(s): %d points measured, %d reused, in %s\n",
		len(res.Options), res.Measured, res.Reused, res.Elapsed.Round(time.Second))
	rec, selErr := Select(cfg, res.Options)
	res.Recommendation = rec
	files, err := writeOutputs(cfg, res, selErr)
	res.Files = files
	if err != nil {
		return res, err
	}
	return res, selErr
}

// rawFile is where an option's measured points are kept.
func (r *runner) rawFile(name string) string { return filepath.Join(r.cfg.Dir, "raw", name+".json") }

// rawState is the resumable state of one option.
type rawState struct {
	// Signature identifies the measurement settings; points of another signature are not
	// reused.
	Signature string       `json:"signature"`
	Result    OptionResult `json:"result"`
}

func (r *runner) signature(model string, maxCtx int, maxKV int64, gpus int) string {
	return fmt.Sprintf("model=%s max_context=%d max_kv=%d gpus=%d osl=%d decode_tokens=%d reps=%d chat=%v",
		model, maxCtx, maxKV, gpus, r.cfg.OSL, r.cfg.DecodeTokens, r.cfg.Repetitions, r.cfg.Chat)
}

func (r *runner) loadRaw(name, sig string) OptionResult {
	data, err := os.ReadFile(r.rawFile(name))
	if err != nil {
		return OptionResult{}
	}
	var st rawState
	if json.Unmarshal(data, &st) != nil || st.Signature != sig {
		fmt.Fprintf(r.cfg.Progress, "%s: earlier results in %s were measured with other settings: measuring again\n", name, r.rawFile(name))
		return OptionResult{}
	}
	return st.Result
}

func (r *runner) saveRaw(name, sig string, or *OptionResult) error {
	data, err := json.MarshalIndent(rawState{Signature: sig, Result: *or}, "", " ")
	if err != nil {
		return err
	}
	tmp := r.rawFile(name) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("profiler: save results: %w", err)
	}
	if err := os.Rename(tmp, r.rawFile(name)); err != nil {
		return fmt.Errorf("profiler: save results: %w", err)
	}
	return nil
}

// progress prints one line per point with the run's ETA: the points left of each kind
// times the mean time of the points of that kind measured so far (of any kind while none
// of it was measured).
func (r *runner) progress(opt, what string, kind int, reused bool) {
	r.done++
	r.kindDone[kind]++
	now := time.Now()
	if !reused {
		r.kindMeasured[kind]++
		r.kindTime[kind] += now.Sub(r.lastPoint)
	}
	r.lastPoint = now
	elapsed := now.Sub(r.start)
	allTime, allMeasured := r.kindTime[0]+r.kindTime[1], r.kindMeasured[0]+r.kindMeasured[1]
	eta := "?"
	if r.done >= r.total {
		eta = "0:00"
	} else if allMeasured > 0 {
		var left time.Duration
		for k := range 2 {
			avg := allTime / time.Duration(allMeasured)
			if r.kindMeasured[k] > 0 {
				avg = r.kindTime[k] / time.Duration(r.kindMeasured[k])
			}
			left += avg * time.Duration(max(0, r.kindTotal[k]-r.kindDone[k]))
		}
		eta = fmtDuration(left)
	}
	const width = 20
	filled := min(width, width*r.done/max(1, r.total))
	fmt.Fprintf(r.cfg.Progress, "%-6s [%s%s] %3d/%-3d %-44s elapsed %s ETA %s\n", opt,
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), r.done, r.total, what, fmtDuration(elapsed), eta)
}

func fmtDuration(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

func (r *runner) profileOption(ctx context.Context, o Option) (*OptionResult, error) {
	if o.Command != "" {
		stop, url, err := startEngine(ctx, o, r.cfg.Progress)
		if err != nil {
			return nil, err
		}
		defer stop()
		if o.URL == "" {
			o.URL = url
		}
	}
	c := newClient(o.URL, r.cfg.Chat, r.cfg.RequestTimeout)
	mi, err := c.resolveModel(ctx, r.cfg.Model)
	if err != nil {
		return nil, fmt.Errorf("option %q: %w", o.Name, err)
	}
	maxCtx := r.cfg.MaxContextLength
	if maxCtx == 0 {
		maxCtx = mi.MaxModelLen
	}
	if maxCtx <= 100 {
		return nil, fmt.Errorf("profiler: option %q: the context limit is unknown (/v1/models has no max_model_len > 100): set --max-context-length", o.Name)
	}
	maxKV := r.cfg.MaxKVTokens
	if maxKV == 0 {
		maxKV = c.kvCapacity(ctx)
	}
	if maxKV == 0 {
		return nil, fmt.Errorf("profiler: option %q: the KV capacity is unknown (%s/metrics has no vllm:cache_config_info): set --max-kv-tokens", o.Name, c.base)
	}
	islGrid := r.cfg.PrefillISLs
	if len(islGrid) == 0 {
		islGrid = prefillGrid(maxCtx, r.cfg.PrefillGranularity)
	}
	for _, c := range r.cfg.DecodeContexts {
		if c <= r.cfg.DecodeTokens/2 || c+r.cfg.DecodeTokens/2 > maxCtx {
			return nil, fmt.Errorf("profiler: option %q: decode context %d: want (%d, %d] (decode tokens %d, context limit %d)",
				o.Name, c, r.cfg.DecodeTokens/2, maxCtx-r.cfg.DecodeTokens/2, r.cfg.DecodeTokens, maxCtx)
		}
	}
	dGrid := decodeGrid(maxCtx, r.cfg.OSL, r.cfg.DecodeGranularity, maxKV, r.cfg.DecodeContexts, r.cfg.MaxInFlight)
	n := len(islGrid) + len(dGrid)
	r.resolved += n
	r.total = r.resolved + (r.optionsPending-1)*n // options not started yet: as many points as this one
	r.resolvedKind[0] += len(islGrid)
	r.resolvedKind[1] += len(dGrid)
	r.kindTotal[0] = r.resolvedKind[0] + (r.optionsPending-1)*len(islGrid)
	r.kindTotal[1] = r.resolvedKind[1] + (r.optionsPending-1)*len(dGrid)
	r.lastPoint = time.Now() // starting an engine is not a point's time
	fmt.Fprintf(r.cfg.Progress, "%s: %s model %q, context limit %d, KV capacity %d tokens, %d GPU(s): %d prefill + %d decode points\n",
		o.Name, c.base, c.model, maxCtx, maxKV, o.GPUs, len(islGrid), len(dGrid))

	sig := r.signature(c.model, maxCtx, maxKV, o.GPUs)
	old := r.loadRaw(o.Name, sig)
	or := &OptionResult{Option: o, Model: c.model, MaxContext: maxCtx, MaxKVTokens: maxKV}
	for _, isl := range islGrid {
		if isl < 1 || isl >= maxCtx {
			return nil, fmt.Errorf("profiler: option %q: prefill isl %d outside [1, %d)", o.Name, isl, maxCtx)
		}
		var pr PrefillResult
		found := false
		for _, p := range old.Prefill {
			if p.Requested == isl {
				pr, found = p, true
			}
		}
		if found {
			r.reused++
		} else {
			if pr, err = r.measurePrefill(ctx, c, isl, o.GPUs); err != nil {
				return nil, fmt.Errorf("option %q: %w", o.Name, err)
			}
		}
		or.Prefill = append(or.Prefill, pr)
		if err := r.saveRaw(o.Name, sig, or); err != nil {
			return nil, err
		}
		r.progress(o.Name, fmt.Sprintf("prefill isl=%d ttft=%.1fms", pr.ISL, pr.TTFTMs), 0, found)
	}
	or.Decode = []DecodeResult{}
	for _, p := range dGrid {
		var dr DecodeResult
		found := false
		for _, d := range old.Decode {
			if d.Nominal == p.Context && d.N == p.N {
				dr, found = d, true
			}
		}
		if found {
			r.reused++
		} else {
			if dr, err = r.measureDecode(ctx, c, p, maxKV, o.GPUs); err != nil {
				return nil, fmt.Errorf("option %q: %w", o.Name, err)
			}
		}
		or.Decode = append(or.Decode, dr)
		if err := r.saveRaw(o.Name, sig, or); err != nil {
			return nil, err
		}
		r.progress(o.Name, fmt.Sprintf("decode ctx=%d n=%d itl=%.1fms", p.Context, p.N, dr.ITLMs), 1, found)
	}
	return or, nil
}

// startEngine runs an option's command with {port} replaced by a free port, waits until its
// /v1/models answers (at most 3 minutes) and returns a function that stops it (SIGTERM to
// its process group, SIGKILL after 30 s).
func startEngine(ctx context.Context, o Option, progress interface{ Write([]byte) (int, error) }) (func(), string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", fmt.Errorf("profiler: option %q: free port: %w", o.Name, err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close()
	command := strings.ReplaceAll(o.Command, "{port}", port)
	url := "http://127.0.0.1:" + port
	cmd := exec.Command("sh", "-c", command)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The engine's output goes to a file of its own (never a fixed name in a shared /tmp,
	// which another run or a planted symlink could own).
	f, err := os.CreateTemp("", "planner-profile-"+o.Name+"-*.log")
	if err != nil {
		return nil, "", fmt.Errorf("profiler: option %q: %w", o.Name, err)
	}
	logFile := f.Name()
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, "", fmt.Errorf("profiler: option %q: start %q: %w", o.Name, command, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = f.Close(); close(exited) }()
	stop := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}
	fmt.Fprintf(progress, "%s: started %q (pid %d, log %s)\n", o.Name, command, cmd.Process.Pid, logFile)
	if o.URL != "" {
		url = o.URL
	}
	deadline := time.Now().Add(3 * time.Minute)
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(strings.TrimRight(url, "/"), "/v1")+"/v1/models", nil)
		resp, err := hc.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return stop, url, nil
			}
		}
		select {
		case <-exited:
			return nil, "", fmt.Errorf("profiler: option %q: %w: the engine command exited before serving (log %s)", o.Name, ErrUnreachable, logFile)
		case <-ctx.Done():
			stop()
			return nil, "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, "", fmt.Errorf("profiler: option %q: %w: %s not ready after 3 minutes (log %s)", o.Name, ErrUnreachable, url, logFile)
		}
	}
}
