// Package promtest starts a real Prometheus server (the Debian `prometheus` binary, 2.42) for
// integration tests: it writes a configuration that scrapes the given targets every second,
// runs the server on a free loopback port with its storage in the test's temporary
// directory, waits until it is ready and stops it when the test ends.
//
// Prometheus is ready in a fraction of a second but its first scrape lands about five seconds
// after start (the scrape manager's discovery throttle): tests must poll for the data they
// need, with a deadline, rather than sleep.
package promtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// EnvBinary names the environment variable that overrides the Prometheus binary's path.
const EnvBinary = "PLANNER_PROMETHEUS"

// DefaultBinary is where Debian's prometheus package installs the server.
const DefaultBinary = "/usr/bin/prometheus"

// ScrapeInterval is the scrape (and evaluation) interval of the generated configuration.
const ScrapeInterval = time.Second

// Server is a running Prometheus.
type Server struct {
	// URL is the server's base URL (http://127.0.0.1:<port>).
	URL string

	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	waitErr error
}

// Binary returns the Prometheus binary: $PLANNER_PROMETHEUS, else prometheus on $PATH, else
// DefaultBinary; an error when none exists.
func Binary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvBinary, p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("prometheus"); err == nil {
		return p, nil
	}
	if _, err := os.Stat(DefaultBinary); err != nil {
		return "", fmt.Errorf("prometheus binary not found on $PATH nor at %s: %w", DefaultBinary, err)
	}
	return DefaultBinary, nil
}

// Start runs Prometheus scraping targets, each either host:port (path /metrics) or a full
// http URL of a metrics endpoint, every ScrapeInterval. The test is skipped only when no
// binary is installed (install it with `apt-get install -y --no-install-recommends
// prometheus`); any other failure, including a $PLANNER_PROMETHEUS naming a missing file,
// fails the test.
func Start(t testing.TB, targets ...string) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil && os.Getenv(EnvBinary) != "" {
		t.Fatalf("promtest: %v", err) // an explicit path that does not exist is a broken setup, not a missing tool
	}
	if err != nil {
		t.Skipf("promtest: skipping, the Prometheus server is not installed (apt-get install -y --no-install-recommends prometheus, or set %s): %v", EnvBinary, err)
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "prometheus.yml")
	cfg, err := config(targets)
	if err != nil {
		t.Fatalf("promtest: %v", err)
	}
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatalf("promtest: write config: %v", err)
	}
	// A free port can be taken between our probe and Prometheus's bind: retry a few times.
	var lastErr error
	for attempt := range 3 {
		s, err := start(t, bin, cfgPath, filepath.Join(dir, fmt.Sprintf("data-%d", attempt)),
			filepath.Join(dir, fmt.Sprintf("prometheus-%d.log", attempt)))
		if err == nil {
			return s
		}
		lastErr = err
	}
	t.Fatalf("promtest: %v", lastErr)
	return nil
}

func start(t testing.TB, bin, cfgPath, dataDir, logPath string) (*Server, error) {
	t.Helper()
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create log file: %w", err)
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.Command(bin,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+dataDir,
		"--web.listen-address="+addr,
		"--log.level=info")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &Server{URL: "http://" + addr, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(s.stop)

	if err := s.waitReady(30 * time.Second); err != nil {
		s.stop()
		return nil, fmt.Errorf("%w\n--- prometheus log ---\n%s", err, s.Log())
	}
	return s, nil
}

func (s *Server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("prometheus exited before it was ready: %v", s.waitErr)
		default:
		}
		resp, err := client.Get(s.URL + "/-/ready")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("prometheus at %s not ready after %v", s.URL, timeout)
}

// stop terminates the server: SIGTERM, then SIGKILL after 10 s.
func (s *Server) stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// Log returns the server's log so far (for failure messages).
func (s *Server) Log() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	return string(bytes.TrimSpace(b))
}

// Query evaluates an instant query at ts (GET /api/v1/query) and returns the vector it
// yields.
func (s *Server) Query(ctx context.Context, query string, ts time.Time) (model.Vector, error) {
	u := s.URL + "/api/v1/query?" + url.Values{
		"query": {query},
		"time":  {strconv.FormatFloat(float64(ts.UnixNano())/1e9, 'f', -1, 64)},
	}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", query, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", query, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("query %q: HTTP %s: decode: %w", query, resp.Status, err)
	}
	if r.Status != "success" || r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %q: HTTP %s: status %q, result type %q, error %q", query, resp.Status, r.Status, r.Data.ResultType, r.Error)
	}
	var vec model.Vector
	if err := json.Unmarshal(r.Data.Result, &vec); err != nil {
		return nil, fmt.Errorf("query %q: decode vector: %w", query, err)
	}
	return vec, nil
}

// WaitFor polls query (every 100 ms, evaluated now) until done accepts its result, and fails
// the test with the last result and the server log after timeout.
func (s *Server) WaitFor(t testing.TB, query string, timeout time.Duration, done func(model.Vector) bool) model.Vector {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var (
		last    model.Vector
		lastErr error
	)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		last, lastErr = s.Query(ctx, query, time.Now())
		cancel()
		if lastErr == nil && done(last) {
			return last
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("promtest: %q not satisfied after %v: last result %v, last error %v\n--- prometheus log ---\n%s",
		query, timeout, last, lastErr, s.Log())
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// config renders the Prometheus configuration: one job per target.
func config(targets []string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  scrape_timeout: %s\n  evaluation_interval: %s\nscrape_configs:\n",
		ScrapeInterval, ScrapeInterval, ScrapeInterval)
	for i, target := range targets {
		scheme, host, path := "http", target, "/metrics"
		if strings.Contains(target, "://") {
			u, err := url.Parse(target)
			if err != nil {
				return "", fmt.Errorf("target %q: %w", target, err)
			}
			scheme, host = u.Scheme, u.Host
			if u.Path != "" {
				path = u.Path
			}
		}
		if host == "" {
			return "", errors.New("promtest: empty scrape target")
		}
		fmt.Fprintf(&b, "  - job_name: target-%d\n    scheme: %s\n    metrics_path: %q\n    static_configs:\n      - targets: [%q]\n",
			i, scheme, path, host)
	}
	return b.String(), nil
}
