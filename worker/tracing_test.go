package worker

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTracingFromEnv: traces are off unless the OTEL_* environment asks for them (no provider,
// no exporter), on with an OTLP endpoint or exporter, and refused with an exporter or protocol
// the worker cannot honour.
func TestTracingFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		exporter string // "" : tracing off
		err      string
	}{
		{name: "nothing set: off", env: nil},
		{name: "unrelated OTEL settings: off", env: map[string]string{"OTEL_SERVICE_NAME": "x", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}},
		{name: "endpoint: on, http/protobuf by default", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
			exporter: "otlp http/protobuf"},
		{name: "traces endpoint and grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4317",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, exporter: "otlp grpc"},
		{name: "the traces protocol wins", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, exporter: "otlp http/protobuf"},
		{name: "exporter otlp without endpoint: on, the exporter's default endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "OTLP"},
			exporter: "otlp http/protobuf"},
		{name: "exporter none wins over an endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "none",
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}},
		{name: "SDK disabled wins", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
		{name: "unknown exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: `OTEL_TRACES_EXPORTER="zipkin": this worker exports traces with otlp only`},
		{name: "unknown protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: `OTLP protocol "http/json"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) {
				v, ok := tc.env[k]
				return v, ok
			}
			tr, err := TracingFromEnv(context.Background(), lookup)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.Nil(t, tr)
				return
			}
			require.NoError(t, err)
			if tc.exporter == "" {
				require.Nil(t, tr, "no tracer provider or exporter when traces are off")
				return
			}
			require.NotNil(t, tr)
			t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
			require.Equal(t, tc.exporter, tr.Exporter)
			require.NotNil(t, tr.ClientInterceptor())
			require.NotNil(t, tr.WorkerInterceptor())
		})
	}
}
