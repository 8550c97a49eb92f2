package profiler

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ErrUnreachable is wrapped by the errors of an endpoint that does not answer.
var ErrUnreachable = errors.New("endpoint unreachable")

// ErrModelMismatch is wrapped when the endpoint does not serve the requested model.
var ErrModelMismatch = errors.New("model not served by the endpoint")

// client talks to one OpenAI-compatible endpoint.
type client struct {
	base  string // e.g. http://127.0.0.1:8000 (no trailing /v1)
	model string
	chat  bool
	http  *http.Client
}

func newClient(baseURL string, chat bool, timeout time.Duration) *client {
	base := strings.TrimRight(baseURL, "/")
	base = strings.TrimSuffix(base, "/v1")
	return &client{base: base, chat: chat, http: &http.Client{Timeout: timeout, Transport: &http.Transport{
		MaxIdleConns: 8192, MaxIdleConnsPerHost: 8192, MaxConnsPerHost: 0, IdleConnTimeout: 90 * time.Second,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}}}
}

// modelInfo is what /v1/models tells about the served model.
type modelInfo struct {
	ID          string `json:"id"`
	MaxModelLen int    `json:"max_model_len"`
}

// resolveModel checks the endpoint serves want ("" = its only model) and returns the
// model's entry.
func (c *client) resolveModel(ctx context.Context, want string) (modelInfo, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/models", nil)
	if err != nil {
		return modelInfo{}, fmt.Errorf("profiler: endpoint %q: %w", c.base, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return modelInfo{}, fmt.Errorf("profiler: %w: GET %s/v1/models: %w", ErrUnreachable, c.base, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return modelInfo{}, fmt.Errorf("profiler: %w: GET %s/v1/models: HTTP %d: %s", ErrUnreachable, c.base, resp.StatusCode, bytes.TrimSpace(data))
	}
	var list struct {
		Data []modelInfo `json:"data"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return modelInfo{}, fmt.Errorf("profiler: GET %s/v1/models: not an OpenAI model list: %w", c.base, err)
	}
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
		if m.ID == want || (want == "" && len(list.Data) == 1) {
			c.model = m.ID
			return m, nil
		}
	}
	if want == "" {
		return modelInfo{}, fmt.Errorf("profiler: %w: %s serves %d models (%s): name one with --model", ErrModelMismatch, c.base, len(ids), strings.Join(ids, ", "))
	}
	return modelInfo{}, fmt.Errorf("profiler: %w: %s serves [%s], not %q", ErrModelMismatch, c.base, strings.Join(ids, ", "), want)
}

// kvCapacity reads the engine's KV capacity in tokens from its Prometheus metrics (vLLM's
// vllm:cache_config_info labels num_gpu_blocks and block_size); 0 when unavailable.
func (c *client) kvCapacity(ctx context.Context) int64 {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/metrics", nil)
	if err != nil {
		return 0
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0
	}
	for name, fam := range families {
		if name != "vllm:cache_config_info" {
			continue
		}
		for _, m := range fam.GetMetric() {
			var blocks, size int64
			for _, l := range m.GetLabel() {
				v, _ := strconv.ParseInt(l.GetValue(), 10, 64)
				switch l.GetName() {
				case "num_gpu_blocks":
					blocks = v
				case "block_size":
					size = v
				}
			}
			if blocks > 0 && size > 0 {
				return blocks * size
			}
		}
	}
	return 0
}

// runningMetrics are the engine metrics of the requests running, by engine: vLLM's and
// SGLang's.
var runningMetrics = []string{"vllm:num_requests_running", "sglang:num_running_reqs"}

// running reads the number of requests the engine is running from its Prometheus metrics
// (the sum over the series of the first of runningMetrics present); ok is false when the
// metrics have none.
func (c *client) running(ctx context.Context) (n float64, ok bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/metrics", nil)
	if err != nil {
		return 0, false
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, false
	}
	for _, name := range runningMetrics {
		fam, found := families[name]
		if !found {
			continue
		}
		for _, m := range fam.GetMetric() {
			n += m.GetGauge().GetValue()
		}
		return n, true
	}
	return 0, false
}

// waitRunning polls the engine's metrics until it runs at least n requests, for at most
// timeout; it returns at once when the metrics do not report running requests.
func (c *client) waitRunning(ctx context.Context, n int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		got, ok := c.running(ctx)
		if !ok || got >= float64(n) || time.Now().After(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// completion is the outcome of one request.
type completion struct {
	// Sent is when the request was written; Tokens the arrival times of the streamed
	// tokens (empty when not streamed); Done when the answer ended.
	Sent, Done time.Time
	Tokens     []time.Time
	// PromptTokens is usage.prompt_tokens (0 if not reported).
	PromptTokens int
}

// complete sends one request with the prompt and maxTokens output tokens. wrote, if set, is
// called once the request is written.
func (c *client) complete(ctx context.Context, prompt string, maxTokens int, stream bool, wrote func()) (completion, error) {
	body := map[string]any{"model": c.model, "max_tokens": maxTokens, "stream": stream, "ignore_eos": true, "min_tokens": maxTokens}
	path := "/v1/completions"
	if c.chat {
		path = "/v1/chat/completions"
		body["messages"] = []map[string]string{{"role": "user", "content": prompt}}
	} else {
		body["prompt"] = prompt
	}
	if stream {
		body["stream_options"] = map[string]bool{"include_usage": true}
	}
	data, _ := json.Marshal(body)
	var out completion
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) {
		out.Sent = time.Now()
		if wrote != nil {
			wrote()
		}
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, c.base+path, bytes.NewReader(data))
	if err != nil {
		return out, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		return out, fmt.Errorf("%w: POST %s%s: %w", ErrUnreachable, c.base, path, err)
	}
	defer resp.Body.Close()
	if out.Sent.IsZero() {
		out.Sent = start
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		err := fmt.Errorf("POST %s%s: HTTP %d: %s", c.base, path, resp.StatusCode, bytes.TrimSpace(msg))
		if resp.StatusCode == http.StatusNotFound {
			err = fmt.Errorf("%w: %w", ErrModelMismatch, err)
		}
		return out, err
	}
	var usage struct {
		Usage *struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if !stream {
		raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		if err != nil {
			return out, fmt.Errorf("read answer: %w", err)
		}
		out.Done = time.Now()
		if json.Unmarshal(raw, &usage) == nil && usage.Usage != nil {
			out.PromptTokens = usage.Usage.PromptTokens
		}
		return out, nil
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("data:")) {
			continue
		}
		payload := bytes.TrimSpace(line[len("data:"):])
		if bytes.Equal(payload, []byte("[DONE]")) {
			break
		}
		now := time.Now()
		var ev struct {
			Choices []struct {
				Text  string `json:"text"`
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(payload, &ev); err != nil {
			return out, fmt.Errorf("decode stream event: %w", err)
		}
		if ev.Error != nil {
			return out, fmt.Errorf("stream error: %s", ev.Error.Message)
		}
		if ev.Usage != nil {
			out.PromptTokens = ev.Usage.PromptTokens
		}
		if len(ev.Choices) > 0 && (ev.Choices[0].Text != "" || ev.Choices[0].Delta.Content != "") {
			out.Tokens = append(out.Tokens, now)
		}
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read stream: %w", err)
	}
	out.Done = time.Now()
	return out, nil
}
