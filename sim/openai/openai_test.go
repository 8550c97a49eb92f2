package openai

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/sim/engine"
)

func newTestServer(t *testing.T) (*Server, string) {
	t.Helper()
	cfg := engine.DefaultConfig(engine.RoleAggregated)
	cfg.SpeedupRatio = 100 // the mocker polynomial, 100× faster than real time
	eng, err := engine.New(cfg, engine.MockerPolynomial())
	require.NoError(t, err)
	live := engine.NewLive(eng, engine.LiveOptions{})
	s, err := New(live, Options{Model: "m", MaxModelLen: 1000, BlockSize: 64, CacheBlocks: 1024})
	require.NoError(t, err)
	mux := http.NewServeMux()
	s.Register(mux)
	mux.Handle("GET /metrics", MetricsHandler(live, eng.Config()))
	hs := httptest.NewServer(mux)
	t.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = live.Stop(ctx)
	})
	return s, hs.URL
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		b.WriteString(sc.Text())
		b.WriteString("\n")
	}
	return resp.StatusCode, b.String()
}

func TestCompletions(t *testing.T) {
	_, url := newTestServer(t)
	tests := []struct {
		name, path, body string
		code             int
		want             []string
		chunks           int // streamed token chunks
	}{
		{name: "completion", path: "/v1/completions", body: `{"model":"m","prompt":"a b c","max_tokens":3}`, code: 200,
			want: []string{`"prompt_tokens":3`, `"completion_tokens":3`, `"text":" tok tok tok"`, `"finish_reason":"length"`}},
		{name: "streamed completion with usage", path: "/v1/completions",
			body: `{"model":"m","prompt":"a b c d","max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}`, code: 200,
			want: []string{`"prompt_tokens":4`, `"total_tokens":9`, "data: [DONE]"}, chunks: 5},
		{name: "streamed chat", path: "/v1/chat/completions",
			body: `{"messages":[{"role":"user","content":"hi there"}],"max_tokens":4,"stream":true}`, code: 200,
			want: []string{`"role":"assistant"`, "chat.completion.chunk", "data: [DONE]"}, chunks: 4},
		{name: "token ids", path: "/v1/completions", body: `{"prompt":[1,2,3,4,5,6],"max_tokens":1}`, code: 200,
			want: []string{`"prompt_tokens":6`}},
		{name: "lengths only (load generator)", path: "/v1/completions", body: `{"isl":50,"osl":2}`, code: 200,
			want: []string{`"prompt_tokens":50`, `"completion_tokens":2`}},
		{name: "other model", path: "/v1/completions", body: `{"model":"x","prompt":"a"}`, code: 404,
			want: []string{"The model `x` does not exist.", "NotFoundError"}},
		{name: "too long", path: "/v1/completions", body: `{"prompt":"a b","max_tokens":999}`, code: 400,
			want: []string{"maximum context length is 1000 tokens"}},
		{name: "empty prompt", path: "/v1/completions", body: `{"prompt":"  "}`, code: 400, want: []string{"empty"}},
		{name: "bad max_tokens", path: "/v1/completions", body: `{"prompt":"a","max_tokens":0}`, code: 400, want: []string{"max_tokens 0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := post(t, url+tc.path, tc.body)
			require.Equal(t, tc.code, code, body)
			for _, w := range tc.want {
				require.Contains(t, body, w)
			}
			if tc.chunks > 0 {
				n := 0
				for _, line := range strings.Split(body, "\n") {
					if strings.Contains(line, " tok") {
						n++
					}
				}
				require.Equal(t, tc.chunks, n, body)
			}
		})
	}
	resp, err := http.Get(url + "/v1/models")
	require.NoError(t, err)
	var list ModelList
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	_ = resp.Body.Close()
	require.Equal(t, []Model{{ID: "m", Object: "model", Created: list.Data[0].Created, OwnedBy: "planner-sim", MaxModelLen: 1000}}, list.Data)
	_, metrics := func() (int, string) {
		resp, err := http.Get(url + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		var b strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
		}
		return resp.StatusCode, b.String()
	}()
	require.Contains(t, metrics, `vllm:cache_config_info{block_size="64",num_gpu_blocks="16384"} 1`)
}

func TestPrefixCache(t *testing.T) {
	s, _ := newTestServer(t)
	words := strings.Fields(strings.Repeat("w ", 130))
	require.Equal(t, 0, s.cacheHit(words, 130), "first time: nothing cached")
	require.Equal(t, 128, s.cacheHit(words, 130), "two full blocks of 64")
	other := append([]string{"x"}, words[1:]...)
	require.Equal(t, 0, s.cacheHit(other, 130), "a different first block changes every hash of the chain")
	exact := words[:128]
	require.Equal(t, 127, s.cacheHit(exact, 128), "at least one token is computed")
}
