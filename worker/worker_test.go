package worker

import (
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/workflows"
)

// clearTemporalEnv isolates a test from the machine's TEMPORAL_* settings.
func clearTemporalEnv(t *testing.T) {
	for _, k := range []string{"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_API_KEY", "TEMPORAL_TLS", "TEMPORAL_PROFILE",
		"TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CLIENT_KEY_PATH", "TEMPORAL_TLS_SERVER_NAME"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("TEMPORAL_CONFIG_FILE", filepath.Join(t.TempDir(), "absent.toml"))
}

func TestClientOptionsLikeTheTemporalCLI(t *testing.T) {
	clearTemporalEnv(t)
	opts, err := ClientOptions(nil, nil)
	require.NoError(t, err)
	require.Equal(t, "localhost:7233", opts.HostPort, "nothing set: the local dev server")
	require.Equal(t, "default", opts.Namespace)

	profile := filepath.Join(t.TempDir(), "temporal.toml")
	require.NoError(t, os.WriteFile(profile, []byte(`
[profile.prod]
address = "prod.tmprl.cloud:7233"
namespace = "planners.acct"
api_key = "secret"
[profile.prod.tls]
server_name = "prod.tmprl.cloud"
`), 0o600))
	t.Setenv("TEMPORAL_CONFIG_FILE", profile)
	t.Setenv("TEMPORAL_PROFILE", "prod")
	opts, err = ClientOptions(nil, nil)
	require.NoError(t, err)
	require.Equal(t, "prod.tmprl.cloud:7233", opts.HostPort)
	require.Equal(t, "planners.acct", opts.Namespace)
	require.NotNil(t, opts.Credentials, "the API key becomes credentials")
	require.NotNil(t, opts.ConnectionOptions.TLS)
	require.Equal(t, "prod.tmprl.cloud", opts.ConnectionOptions.TLS.ServerName)

	// The environment wins over the profile, as for the CLI.
	t.Setenv("TEMPORAL_NAMESPACE", "staging")
	opts, err = ClientOptions(nil, nil)
	require.NoError(t, err)
	require.Equal(t, "staging", opts.Namespace)

	t.Setenv("TEMPORAL_PROFILE", "nope")
	_, err = ClientOptions(nil, nil)
	require.ErrorContains(t, err, "unable to find profile nope")
}

func TestMetricsExposition(t *testing.T) {
	m, err := NewMetrics()
	require.NoError(t, err)
	h := m.SDK.WithTags(map[string]string{"namespace": "default"})
	h.Counter("temporal_request").Inc(2)
	h.WithTags(map[string]string{"operation": "Poll"}).Counter("temporal_request").Inc(1)
	h.Timer("temporal_request_latency").Record(30 * time.Millisecond)
	m.planners.TickStarted(workflows.Deployment{Namespace: "ns", Name: "x"}, 1, time.Now())
	three := 3
	m.planners.Observed(workflows.ObserveAllRequest{ObserveRequest: workflows.ObserveRequest{Deployment: workflows.Deployment{Namespace: "ns", Name: "x"}}, Inventory: true},
		workflows.ObserveAllResult{Inventory: &connectors.Inventory{WorkerCounts: scaling.WorkerCounts{ReadyDecode: &three}}})

	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	text := string(b)
	require.Contains(t, text, "# TYPE temporal_request_total counter")
	require.Contains(t, text, `temporal_request_total{namespace="default"} 2`)
	require.Contains(t, text, `temporal_request_total{namespace="default",operation="Poll"} 1`, "label sets may differ within a family")
	require.Contains(t, text, `temporal_request_latency_seconds_bucket{namespace="default",le="0.05"} 1`)
	require.Contains(t, text, `temporal_request_latency_seconds_bucket{namespace="default",le="0.025"} 0`)
	require.Contains(t, text, `dynamo_planner_num_decode_replicas{deployment="planner/ns/x"} 3`)
	require.Contains(t, text, "go_goroutines")
}

// TestClientOptionsTLSFailsClosed: a TEMPORAL_TLS the SDK would ignore, and an API key over
// plaintext, are refused rather than connected in the clear.
func TestClientOptionsTLSFailsClosed(t *testing.T) {
	clearTemporalEnv(t)
	for _, v := range []string{"yes", "on", "enabled", "tru"} {
		t.Setenv("TEMPORAL_TLS", v)
		_, err := ClientOptions(nil, nil)
		require.ErrorContains(t, err, "TEMPORAL_TLS", v)
	}
	t.Setenv("TEMPORAL_TLS", "TRUE")
	opts, err := ClientOptions(nil, nil)
	require.NoError(t, err)
	require.NotNil(t, opts.ConnectionOptions.TLS, "true enables TLS")

	t.Setenv("TEMPORAL_API_KEY", "secret")
	t.Setenv("TEMPORAL_TLS", "false")
	_, err = ClientOptions(nil, nil)
	require.ErrorContains(t, err, "plaintext")
	os.Unsetenv("TEMPORAL_TLS")
	opts, err = ClientOptions(nil, nil)
	require.NoError(t, err, "an API key alone enables TLS")
	require.NotNil(t, opts.ConnectionOptions.TLS)
}
