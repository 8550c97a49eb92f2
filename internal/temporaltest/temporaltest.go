// Package temporaltest starts the real Temporal dev server (the `temporal` CLI built into
// .tools/bin by `make temporal-cli`) for integration tests, with the planner's search
// attributes registered, and stops it when the test ends. Nothing is downloaded: a missing
// binary fails the test with the command that builds it.
package temporaltest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/llmplanner/planner/internal/repo"
	"github.com/llmplanner/planner/workflows"
)

// CLIPath is the temporal CLI binary: $PLANNER_TEMPORAL_CLI, else .tools/bin/temporal at the
// module root.
func CLIPath(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("PLANNER_TEMPORAL_CLI"); p != "" {
		return p
	}
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, ".tools", "bin", "temporal")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the temporal CLI is not built (%v): run 'make temporal-cli' (builds it from the Go module proxy, about 6 minutes once)", err)
	}
	return p
}

// Server is a running dev server.
type Server struct {
	// HostPort is the frontend address.
	HostPort string
	// DBFile is the SQLite file it persists to.
	DBFile string
	// ExtraArgs are passed to `temporal server start-dev` (dynamic config values, ...).
	ExtraArgs []string

	t      testing.TB
	dev    *testsuite.DevServer
	client client.Client
}

// Start starts a dev server on a free loopback port with a SQLite file in the test's temp
// dir; it stops when the test ends.
func Start(t testing.TB, extraArgs ...string) *Server {
	t.Helper()
	s := &Server{t: t, DBFile: filepath.Join(t.TempDir(), "temporal.db"), ExtraArgs: extraArgs}
	s.start()
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts := testsuite.DevServerOptions{
		ExistingPath: CLIPath(s.t),
		ClientOptions: &client.Options{HostPort: s.HostPort, Namespace: "default",
			Logger: quietLogger{}},
		DBFilename: s.DBFile,
		LogLevel:   "error",
		SearchAttributes: temporal.NewSearchAttributes(
			temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttributeDeployment).ValueSet(""),
			temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttributeMode).ValueSet(""),
		),
		ExtraArgs: s.ExtraArgs,
		Stdout:    os.Stderr,
		Stderr:    os.Stderr,
	}
	start := time.Now()
	dev, err := testsuite.StartDevServer(ctx, opts)
	if err != nil {
		s.t.Fatalf("start the Temporal dev server: %v", err)
	}
	s.dev, s.HostPort = dev, dev.FrontendHostPort()
	if s.client == nil {
		// One client for the server's whole life: it reconnects across Restart.
		c, err := client.Dial(client.Options{HostPort: s.HostPort, Namespace: "default", Logger: quietLogger{}})
		if err != nil {
			s.t.Fatalf("dial the dev server: %v", err)
		}
		s.client = c
	}
	s.t.Logf("Temporal dev server on %s (db %s) ready in %s", s.HostPort, s.DBFile, time.Since(start).Round(time.Millisecond))
}

// Client is a client of the server's default namespace; it survives Restart and is closed
// when the test ends.
func (s *Server) Client() client.Client { return s.client }

// Stop stops the server and closes the client (idempotent).
func (s *Server) Stop() {
	s.stopProcess()
	if s.client != nil {
		s.client.Close()
		s.client = nil
	}
}

func (s *Server) stopProcess() {
	if s.dev == nil {
		return
	}
	s.dev.Client().Close()
	if err := s.dev.Stop(); err != nil {
		s.t.Logf("stop the dev server: %v", err)
	}
	s.dev = nil
}

// Restart stops the server process and starts it again on the same port and SQLite file;
// Client keeps working once it is back.
func (s *Server) Restart() {
	s.t.Helper()
	s.stopProcess()
	s.start()
}

// Crash SIGKILLs the server process (no graceful shutdown: what it had not written to its
// SQLite file is lost, as in a machine failure) and starts it again on the same port and file.
func (s *Server) Crash() {
	s.t.Helper()
	killed := 0
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), s.DBFile) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err == nil && pid != os.Getpid() && syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed++
		}
	}
	if killed == 0 {
		s.t.Fatalf("crash the dev server: no process runs on %s", s.DBFile)
	}
	s.stopProcess() // reaps it; the error of a killed process is expected
	s.start()
}

// Cmd returns an exec.Cmd of the temporal CLI aimed at this server.
func (s *Server) Cmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, CLIPath(s.t), args...)
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+s.HostPort, "TEMPORAL_NAMESPACE=default")
	return cmd
}

// quietLogger drops the SDK client's logs (the tests log what matters).
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}
