// Package openai serves a simulated engine (sim/engine's Live runner) through the subset of
// the OpenAI API that benchmarking tools and the profiler use: POST /v1/completions and
// POST /v1/chat/completions, streaming (server-sent events) or not, and GET /v1/models.
//
// # Tokens
//
// The simulator has no tokenizer: a prompt's token count is its number of
// whitespace-separated words (strings.Fields), or the length of the list when the prompt
// is a list of token ids. A chat request counts the words of every message's content (no
// chat-template overhead). The non-standard "isl" field, when > 0, overrides the count
// (for load generators that send lengths, not text). The completion has exactly
// max_tokens tokens (as with vLLM's ignore_eos; default 16, OpenAI's), each the text
// " tok"; finish_reason is "length". usage reports prompt_tokens, completion_tokens and
// total_tokens.
//
// # Timing
//
// A streamed token is sent when the engine model produces it: the first at the end of
// the pass that completes the prompt, each later one at the end of the pass that samples
// it, so TTFT and ITL seen by a client are the engine model's (plus HTTP overhead).
//
// # Prefix cache
//
// Like vLLM's automatic prefix caching, a prompt's full blocks of BlockSize tokens are
// hashed as a chain; the leading blocks whose hashes an earlier request already computed
// are a cache hit (engine.Request.CachedTokens, never the whole prompt: at least one token
// is computed). The cache forgets everything once it holds as many blocks as the engine's
// KV capacity. The blocks of a hit are still held per request (no sharing), so KV usage
// is the same with or without the hit.
package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmplanner/planner/sim/engine"
)

// Bounds of a request.
const (
	// MaxBodyBytes bounds a request body (a 128k-token prompt of short words fits).
	MaxBodyBytes = 8 << 20
	// MaxTokens bounds max_tokens.
	MaxTokens = 1 << 16
	// DefaultMaxTokens is OpenAI's default max_tokens.
	DefaultMaxTokens = 16
)

// Options configures a Server.
type Options struct {
	// Model is the served model name (required); requests naming another model get 404.
	Model string
	// MaxModelLen is the context limit in tokens reported by /v1/models (max_model_len, as
	// vLLM reports it) and enforced on prompt + max_tokens (> 0).
	MaxModelLen int
	// BlockSize is the prefix-cache block size in tokens (> 0).
	BlockSize int
	// CacheBlocks bounds the prefix cache in blocks (> 0).
	CacheBlocks int
	// Logger logs rejected requests at debug level; nil discards.
	Logger *slog.Logger
	// Now reads the clock (time.Now by default), for the "created" fields.
	Now func() time.Time
}

// Server serves the OpenAI API over a Live engine. It is safe for concurrent use.
type Server struct {
	live   *engine.Live
	opts   Options
	nextID atomic.Uint64

	mu     sync.Mutex
	cached map[uint64]struct{}
}

// New returns a server for live.
func New(live *engine.Live, opts Options) (*Server, error) {
	switch {
	case live == nil:
		return nil, errors.New("openai: nil engine")
	case opts.Model == "":
		return nil, errors.New("openai: a model name is required")
	case opts.MaxModelLen <= 0 || opts.BlockSize <= 0 || opts.CacheBlocks <= 0:
		return nil, fmt.Errorf("openai: max_model_len %d, block size %d and cache blocks %d must be > 0",
			opts.MaxModelLen, opts.BlockSize, opts.CacheBlocks)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Server{live: live, opts: opts, cached: make(map[uint64]struct{})}, nil
}

// Register adds the routes to mux.
func (s *Server) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/models", s.serveModels)
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, false) })
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, true) })
}

// Model is one entry of /v1/models.
type Model struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	MaxModelLen int    `json:"max_model_len"`
}

// ModelList is the answer of /v1/models.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

func (s *Server) serveModels(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, ModelList{Object: "list", Data: []Model{{
		ID: s.opts.Model, Object: "model", Created: s.opts.Now().Unix(), OwnedBy: "planner-sim", MaxModelLen: s.opts.MaxModelLen,
	}}})
}

// request is the union of the completion and chat request fields the simulator reads.
type request struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	Messages      []message       `json:"messages"`
	MaxTokens     *int            `json:"max_tokens"`
	MaxCompTokens *int            `json:"max_completion_tokens"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	ISL int `json:"isl"`
	OSL int `json:"osl"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// Usage is the token accounting of a completion.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// errorBody is OpenAI's error shape.
type errorBody struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    int    `json:"code"`
	} `json:"error"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) fail(w http.ResponseWriter, code int, typ, format string, args ...any) {
	var e errorBody
	e.Error.Message, e.Error.Type, e.Error.Code = fmt.Sprintf(format, args...), typ, code
	s.opts.Logger.Debug("request rejected", "status", code, "error", e.Error.Message)
	writeJSON(w, code, e)
}

// tokens returns the prompt's tokens as hashable words and their count.
func (r *request) tokens(chat bool) ([]string, int, error) {
	var words []string
	if chat {
		if len(r.Messages) == 0 {
			return nil, 0, errors.New("messages: at least one message is required")
		}
		for i, m := range r.Messages {
			var text string
			if err := json.Unmarshal(m.Content, &text); err != nil {
				// Content parts: [{"type":"text","text":"..."}].
				var parts []struct {
					Text string `json:"text"`
				}
				if err2 := json.Unmarshal(m.Content, &parts); err2 != nil {
					return nil, 0, fmt.Errorf("messages[%d].content: want a string or a list of text parts", i)
				}
				for _, p := range parts {
					text += " " + p.Text
				}
			}
			words = append(words, strings.Fields(text)...)
		}
	} else {
		var text string
		var ids []int64
		switch {
		case len(r.Prompt) == 0:
		case json.Unmarshal(r.Prompt, &text) == nil:
			words = strings.Fields(text)
		case json.Unmarshal(r.Prompt, &ids) == nil:
			words = make([]string, len(ids))
			for i, id := range ids {
				words[i] = fmt.Sprint(id)
			}
		default:
			return nil, 0, errors.New("prompt: want a string or a list of token ids (one prompt per request)")
		}
	}
	n := len(words)
	if r.ISL > 0 {
		n = r.ISL
		words = nil // lengths only: no prefix-cache hit
	}
	if n == 0 {
		return nil, 0, errors.New("the prompt is empty")
	}
	return words, n, nil
}

// cacheHit returns the prompt tokens that hit the prefix cache and records the prompt's
// blocks.
func (s *Server) cacheHit(words []string, isl int) int {
	bs := s.opts.BlockSize
	nBlocks := len(words) / bs
	if nBlocks == 0 {
		return 0
	}
	hashes := make([]uint64, nBlocks)
	h := fnv.New64a()
	for b := range nBlocks {
		for _, w := range words[b*bs : (b+1)*bs] {
			_, _ = h.Write([]byte(w))
			_, _ = h.Write([]byte{0})
		}
		hashes[b] = h.Sum64() // the chain: each hash covers every earlier block
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	hit := 0
	for hit < nBlocks {
		if _, ok := s.cached[hashes[hit]]; !ok {
			break
		}
		hit++
	}
	if len(s.cached)+nBlocks-hit > s.opts.CacheBlocks {
		clear(s.cached)
	}
	for _, hsh := range hashes {
		s.cached[hsh] = struct{}{}
	}
	return min(hit*bs, isl-1)
}

// tokenSink collects token times from the engine runner for one streamed request.
type tokenSink struct {
	mu     sync.Mutex
	times  []time.Time
	notify chan struct{}
}

func (t *tokenSink) add(at time.Time) {
	t.mu.Lock()
	t.times = append(t.times, at)
	t.mu.Unlock()
	select {
	case t.notify <- struct{}{}:
	default:
	}
}

func (t *tokenSink) take() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(t.times)
	t.times = t.times[:0]
	return n
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, chat bool) {
	var req request
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err := dec.Decode(&req); err != nil {
		s.fail(w, http.StatusBadRequest, "BadRequestError", "invalid JSON body: %v", err)
		return
	}
	if req.Model != "" && req.Model != s.opts.Model {
		s.fail(w, http.StatusNotFound, "NotFoundError", "The model `%s` does not exist.", req.Model)
		return
	}
	words, isl, err := req.tokens(chat)
	if err != nil {
		s.fail(w, http.StatusBadRequest, "BadRequestError", "%v", err)
		return
	}
	osl := DefaultMaxTokens
	switch {
	case req.MaxCompTokens != nil:
		osl = *req.MaxCompTokens
	case req.MaxTokens != nil:
		osl = *req.MaxTokens
	case req.OSL > 0:
		osl = req.OSL
	}
	if osl < 1 || osl > MaxTokens {
		s.fail(w, http.StatusBadRequest, "BadRequestError", "max_tokens %d must be in [1, %d]", osl, MaxTokens)
		return
	}
	if isl+osl > s.opts.MaxModelLen {
		s.fail(w, http.StatusBadRequest, "BadRequestError",
			"This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion).",
			s.opts.MaxModelLen, isl+osl, isl, osl)
		return
	}
	cached := 0
	if words != nil {
		cached = s.cacheHit(words, isl)
	}
	id := fmt.Sprintf("cmpl-%d", s.nextID.Add(1))
	if chat {
		id = "chat" + id
	}
	usage := Usage{PromptTokens: isl, CompletionTokens: osl, TotalTokens: isl + osl}
	var sink *tokenSink
	opts := engine.SubmitOptions{CachedTokens: cached}
	if req.Stream {
		sink = &tokenSink{notify: make(chan struct{}, 1)}
		opts.OnToken = sink.add
	}
	ch, err := s.live.SubmitWith(isl, osl, opts)
	if err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, engine.ErrDraining) || errors.Is(err, engine.ErrStopped) {
			code = http.StatusServiceUnavailable
		}
		s.fail(w, code, "ServiceUnavailableError", "%v", err)
		return
	}
	created := s.opts.Now().Unix()
	if !req.Stream {
		select {
		case res := <-ch:
			if res.Err != nil {
				s.fail(w, http.StatusServiceUnavailable, "ServiceUnavailableError", "%v", res.Err)
				return
			}
		case <-r.Context().Done():
			return // the engine still runs the request to completion
		}
		text := strings.Repeat(" tok", osl)
		if chat {
			writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "chat.completion", "created": created, "model": s.opts.Model,
				"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": text}, "finish_reason": "length"}},
				"usage":   usage})
		} else {
			writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "text_completion", "created": created, "model": s.opts.Model,
				"choices": []any{map[string]any{"index": 0, "text": text, "logprobs": nil, "finish_reason": "length"}},
				"usage":   usage})
		}
		return
	}
	s.stream(w, r, chat, id, created, osl, usage, req.StreamOptions != nil && req.StreamOptions.IncludeUsage, sink, ch)
}

// stream writes a streamed completion: one chunk per token as the engine produces it.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, chat bool, id string, created int64, osl int,
	usage Usage, includeUsage bool, sink *tokenSink, ch <-chan engine.Result) {
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	object := "text_completion"
	if chat {
		object = "chat.completion.chunk"
	}
	sent := 0
	send := func(v any) {
		data, _ := json.Marshal(v)
		_, _ = fmt.Fprintf(w, "data: %s\n\n", data)
	}
	chunk := func(last bool) map[string]any {
		var finish any
		if last {
			finish = "length"
		}
		choice := map[string]any{"index": 0, "finish_reason": finish}
		if chat {
			delta := map[string]any{"content": " tok"}
			if sent == 0 {
				delta["role"] = "assistant"
			}
			choice["delta"] = delta
		} else {
			choice["text"], choice["logprobs"] = " tok", nil
		}
		return map[string]any{"id": id, "object": object, "created": created, "model": s.opts.Model, "choices": []any{choice}}
	}
	flushTokens := func() {
		n := sink.take()
		for range n {
			if sent >= osl {
				break
			}
			send(chunk(sent == osl-1))
			sent++
		}
		if n > 0 && flusher != nil {
			flusher.Flush()
		}
	}
	for {
		select {
		case <-sink.notify:
			flushTokens()
		case res := <-ch:
			flushTokens()
			if res.Err != nil {
				send(map[string]any{"error": map[string]any{"message": res.Err.Error(), "type": "ServiceUnavailableError", "code": 503}})
			} else if includeUsage {
				send(map[string]any{"id": id, "object": object, "created": created, "model": s.opts.Model, "choices": []any{}, "usage": usage})
			}
			_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
			if flusher != nil {
				flusher.Flush()
			}
			return
		case <-r.Context().Done():
			return
		}
	}
}
