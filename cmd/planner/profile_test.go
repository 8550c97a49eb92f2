package main

import (
	"net"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/internal/openaitest"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/profiler"
	"github.com/llmplanner/planner/sim/engine"
)

func TestProfileFlags(t *testing.T) {
	tests := []struct {
		value   string
		command bool
		want    profiler.Option
		wantErr string
	}{
		{value: "tp1=http://h:8000,gpus=2", want: profiler.Option{Name: "tp1", URL: "http://h:8000", GPUs: 2}},
		{value: "name=tp1,url=http://h:8000", want: profiler.Option{Name: "tp1", URL: "http://h:8000", GPUs: 1}},
		{value: "name=tp2,gpus=2,cmd=vllm serve m --port {port} --x=1,2", command: true,
			want: profiler.Option{Name: "tp2", GPUs: 2, Command: "vllm serve m --port {port} --x=1,2"}},
		{value: "tp1=http://h,gpus=x", wantErr: "gpus"},
		{value: "tp1=http://h,color=red", wantErr: `unknown key "color"`},
		{value: "name=tp1,gpus=1", command: true, wantErr: "cmd="},
	}
	for _, tc := range tests {
		t.Run(tc.value, func(t *testing.T) {
			var opts []profiler.Option
			err := optionFlag{opts: &opts, command: tc.command}.Set(tc.value)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.Empty(t, opts)
				return
			}
			require.NoError(t, err)
			require.Equal(t, []profiler.Option{tc.want}, opts)
		})
	}
}

// planner profile against a simulated engine on loopback, then planner validate on what it
// wrote: the production path from a measured endpoint (chat completions) to a config the
// planner accepts.
func TestProfileCommand(t *testing.T) {
	code, _, errOut := runCLI("profile")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "usage: planner profile")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	code, _, errOut = runCLI("profile", "--endpoint", "a="+closed, "--out", t.TempDir())
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "endpoint unreachable")

	p, err := perf.LoadProfile("../../perf/testdata/profiles/h200-llama3.1-8b-fp8-tp1")
	require.NoError(t, err)
	timing, err := engine.NewProfileTiming(p)
	require.NoError(t, err)
	eng, err := engine.New(engine.DefaultConfig(engine.RoleAggregated), timing)
	require.NoError(t, err)
	url := openaitest.Serve(t, eng, "m")

	out := t.TempDir()
	code, stdout, errOut := runCLI("profile", "--endpoint", "tp1="+url+",gpus=1", "--isl", "2000", "--osl", "500",
		"--ttft", "200", "--itl", "20", "--prefill-isls", "100,1117,2134,3151", "--decode-contexts", "2997,5644",
		"--decode-granularity", "2", "--repetitions", "1", "--decode-tokens", "40", "--chat", "--out", out)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "ETA")
	require.Contains(t, stdout, "recommended: prefill tp1")

	code, stdout, errOut = runCLI("validate", "-f", filepath.Join(out, "planner-config.yaml"), "--check-profile")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, stdout, "valid")
}
