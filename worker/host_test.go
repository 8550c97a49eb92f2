package worker

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/sim/fpmpub"
)

func parseOne(t *testing.T, file string) HostedDeployment {
	t.Helper()
	df, err := ParseDeployments([]byte(file), t.TempDir(), noEnv)
	require.NoError(t, err)
	return df.Deployments[0]
}

// A second worker hosting the same local deployment is refused (one supervisor per state
// file), with an error and nothing started; the first keeps its workers.
func TestOpenHostRefusesASecondLocalSupervisor(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	require.NoError(t, err)
	spec := parseOne(t, `
deployments:
  - deployment: lab/x
    connector:
      kind: local
      local: {state_file: state.json, gpus: [0], initial: {decode: 1}, decode: {command: [`+sleep+`, "600"]}}
`)
	h, err := OpenHost(context.Background(), spec, HostOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, h.StopDeployment(ctx))
	})
	_, err = OpenHost(context.Background(), spec, HostOptions{})
	require.ErrorContains(t, err, "is supervised by another process")
	require.Len(t, h.Local().Workers(), 1)
}

// The Prometheus token comes from the worker's environment (token_env) and reaches
// Prometheus as a bearer token; an unset variable is an error at start.
func TestOpenHostPrometheusTokenFromEnv(t *testing.T) {
	var mu sync.Mutex
	var auth string
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = r.Header.Get("Authorization")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[]}}`))
	}))
	t.Cleanup(prom.Close)
	spec := parseOne(t, `
deployments:
  - deployment: adv/x
    connector: {kind: noop}
    traffic: {model: m, dynamo_namespace: n, prometheus: {url: "`+prom.URL+`", token_env: PLANNER_TEST_PROM_TOKEN}}
`)
	_, err := OpenHost(context.Background(), spec, HostOptions{LookupEnv: noEnv})
	require.ErrorContains(t, err, "traffic.prometheus.token_env: PLANNER_TEST_PROM_TOKEN is not set in the worker's environment")
	env := func(k string) (string, bool) {
		return map[string]string{"PLANNER_TEST_PROM_TOKEN": "tok"}[k], k == "PLANNER_TEST_PROM_TOKEN"
	}
	h, err := OpenHost(context.Background(), spec, HostOptions{LookupEnv: env})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	obs, err := h.Hosted().Traffic.Traffic(context.Background(), 30*time.Second)
	require.Error(t, err, "no series: the count is unreadable, never zero")
	require.Nil(t, obs.NumReq)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, "Bearer tok", auth)
}

// Static FPM endpoints are subscribed; the reader returns the engines heard within max_age.
func TestOpenHostStaticFPM(t *testing.T) {
	addr := "ipc://" + filepath.Join(t.TempDir(), "fpm.sock")
	pub, err := fpmpub.New(addr, "d0", 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pub.Close() })
	spec := parseOne(t, `
deployments:
  - deployment: ext/x
    connector: {kind: virtual}
    fpm: {endpoints: [{address: "`+addr+`", component: decode}], discovery_interval: 100ms}
`)
	h, err := OpenHost(context.Background(), spec, HostOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	require.Nil(t, h.Hosted().Connector, "virtual: the protocol lives in the workflow")
	require.Eventually(t, func() bool {
		pub.Publish(perf.FPM{WorkerID: "d0", WallTime: 0.01, Scheduled: perf.ScheduledRequests{NumDecodeRequests: 4, SumDecodeKVTokens: 4000}})
		obs, err := h.Hosted().FPM.ReadFPM(time.Now())
		return err == nil && len(obs.Decode) == 1 && obs.Decode[0].WorkerID == "d0"
	}, 10*time.Second, 50*time.Millisecond)
}
