package config

// Mode is the deployment shape the planner manages.
type Mode string

// The modes of Dynamo's planner.
const (
	// ModeDisagg manages a prefill pool and a decode pool.
	ModeDisagg Mode = "disagg"
	// ModePrefill manages only a prefill pool.
	ModePrefill Mode = "prefill"
	// ModeDecode manages only a decode pool.
	ModeDecode Mode = "decode"
	// ModeAgg manages one aggregated pool (prefill and decode on the same engines).
	ModeAgg Mode = "agg"
)

// Target is the optimisation target: sla (perf-model driven) or one of the "easy" threshold
// targets, which turn load scaling on and throughput scaling off.
type Target string

// The optimisation targets.
const (
	// TargetSLA sizes from the perf model against the TTFT and ITL targets.
	TargetSLA Target = "sla"
	// TargetThroughput scales on loose queue and KV thresholds (the default).
	TargetThroughput Target = "throughput"
	// TargetLatency scales on tight queue and KV thresholds.
	TargetLatency Target = "latency"
	// TargetLoad scales on the operator's own queue-token and KV-rate thresholds.
	TargetLoad Target = "load"
)

// Environment selects the connector that applies decisions.
type Environment string

// The environments (connectors). Dynamo knows kubernetes, virtual and global-planner; local
// and noop are this planner's own.
const (
	// EnvKubernetes patches the DynamoGraphDeployment (or its scaling adapter).
	EnvKubernetes Environment = "kubernetes"
	// EnvVirtual publishes decisions for an external orchestrator to acknowledge.
	EnvVirtual Environment = "virtual"
	// EnvGlobalPlanner delegates to Dynamo's GlobalPlanner (not supported here).
	EnvGlobalPlanner Environment = "global-planner"
	// EnvLocal supervises worker processes on this machine.
	EnvLocal Environment = "local"
	// EnvNoop records decisions and applies nothing.
	EnvNoop Environment = "noop"
)

// Backend is the inference engine family; it selects worker component names.
type Backend string

// The backends Dynamo knows.
const (
	BackendVLLM   Backend = "vllm"
	BackendSGLang Backend = "sglang"
	BackendTRTLLM Backend = "trtllm"
	BackendMocker Backend = "mocker"
)

// ThroughputSizing selects how the throughput loop turns predicted traffic into replicas.
type ThroughputSizing string

// The throughput sizing methods.
const (
	// SizingCapacitySearch is Dynamo's current method (G3): an engine-capacity search over the
	// forward-pass model, then the delta cap, endpoint floor and GPU-ceiling fit.
	SizingCapacitySearch ThroughputSizing = "capacity_search"
	// SizingInterpolation is Dynamo's classic method (G1): profile interpolation with
	// observed/expected correction factors.
	SizingInterpolation ThroughputSizing = "interpolation"
)

// ScalingPolicy selects the decision policy.
type ScalingPolicy string

// The scaling policies.
const (
	// PolicyDynamo is Dynamo's planner exactly: the throughput and load loops as configured.
	PolicyDynamo ScalingPolicy = "dynamo"
	// PolicyAhead (extension) is this planner's own policy: every load interval it forecasts
	// the demand over the lead time (the learned startup delay plus the interval) at an upper
	// quantile, adds the queued backlog, and sizes each pool for that demand with per-engine
	// capacities that include queueing at the SLA; scale-downs wait out the lead time. It
	// replaces both of Dynamo's loops (needs optimization_target sla; mode disagg, prefill
	// or decode).
	PolicyAhead ScalingPolicy = "ahead"
)

// The predictor names accepted by load_predictor.
const (
	PredictorConstant = "constant"
	PredictorARIMA    = "arima"
	PredictorKalman   = "kalman"
	PredictorProphet  = "prophet"
)

// Config is the planner configuration of one deployment. Keys are Dynamo's PlannerConfig
// keys (snake_case) so a Dynamo planner config file loads unchanged; fields marked
// "extension" exist only in this planner. Optional values are pointers: nil means "not set"
// (Dynamo's None).
type Config struct {
	// PreDeploymentSweepingMode names how the profile was produced (none, rapid = AI
	// Configurator simulation, thorough = real GPUs). Accepted for compatibility; this planner
	// bootstraps from profile_results_dir or live FPMs whatever its value.
	PreDeploymentSweepingMode string `yaml:"pre_deployment_sweeping_mode" json:"pre_deployment_sweeping_mode"`
	// Environment selects the connector.
	Environment Environment `yaml:"environment" json:"environment"`
	// Namespace is the Dynamo namespace of the deployment (env DYN_NAMESPACE, else "dynamo").
	Namespace string `yaml:"namespace" json:"namespace"`
	// Backend is the engine family (vllm, sglang, trtllm, mocker).
	Backend Backend `yaml:"backend" json:"backend"`
	// Mode is the deployment shape (disagg, prefill, decode, agg).
	Mode Mode `yaml:"mode" json:"mode"`
	// OptimizationTarget is sla or one of the threshold targets throughput, latency, load.
	OptimizationTarget Target `yaml:"optimization_target" json:"optimization_target"`
	// LogDir is accepted for compatibility; logs go to stderr as structured records.
	LogDir *string `yaml:"log_dir" json:"log_dir,omitempty"`

	// ThroughputAdjustmentIntervalSeconds is the throughput loop's period (alias
	// throughput_adjustment_interval).
	ThroughputAdjustmentIntervalSeconds int `yaml:"throughput_adjustment_interval_seconds" json:"throughput_adjustment_interval_seconds"`
	// MaxThroughputScalingReplicas caps how many replicas one throughput step may move a
	// component, in both directions.
	MaxThroughputScalingReplicas int `yaml:"max_throughput_scaling_replicas" json:"max_throughput_scaling_replicas"`
	// MaxGPUBudget is the ceiling on the deployment's total GPUs; negative disables it.
	MaxGPUBudget int `yaml:"max_gpu_budget" json:"max_gpu_budget"`
	// MinGPUBudget is the floor on the deployment's total GPUs; -1 disables it.
	MinGPUBudget int `yaml:"min_gpu_budget" json:"min_gpu_budget"`
	// MinEndpoint is the minimum replicas of each active role unless a role-specific value is set.
	MinEndpoint int `yaml:"min_endpoint" json:"min_endpoint"`
	// PrefillMinEndpoint overrides MinEndpoint for prefill (disagg and prefill modes).
	PrefillMinEndpoint *int `yaml:"prefill_min_endpoint" json:"prefill_min_endpoint,omitempty"`
	// DecodeMinEndpoint overrides MinEndpoint for decode (disagg and decode modes).
	DecodeMinEndpoint *int `yaml:"decode_min_endpoint" json:"decode_min_endpoint,omitempty"`
	// ControlAPIPort is Dynamo's localhost control API port; accepted for compatibility and
	// ignored: overrides go through Temporal updates and signals.
	ControlAPIPort int `yaml:"control_api_port" json:"control_api_port"`
	// DecodeEngineNumGPU is the GPUs per decode (or aggregated) replica when the connector
	// cannot read it from the deployment; unset means 1.
	DecodeEngineNumGPU *int `yaml:"decode_engine_num_gpu" json:"decode_engine_num_gpu,omitempty"`
	// PrefillEngineNumGPU is the GPUs per prefill replica when the connector cannot read it;
	// unset means 1.
	PrefillEngineNumGPU *int `yaml:"prefill_engine_num_gpu" json:"prefill_engine_num_gpu,omitempty"`
	// ProfileResultsDir holds the pre-deployment profile (NPZ or JSON) used to bootstrap the
	// perf models.
	ProfileResultsDir string `yaml:"profile_results_dir" json:"profile_results_dir"`
	// AICInterpolation asks Dynamo to run an AI Configurator sweep at start-up: Python-only,
	// not supported here (an error when set).
	AICInterpolation map[string]any `yaml:"aic_interpolation" json:"aic_interpolation,omitempty"`
	// AICPerfModel selects Dynamo's native AI Configurator perf model: Python-only, not
	// supported here (an error when set).
	AICPerfModel map[string]any `yaml:"aic_perf_model" json:"aic_perf_model,omitempty"`

	// TTFTMs is the time-to-first-token target in milliseconds (alias ttft).
	TTFTMs float64 `yaml:"ttft_ms" json:"ttft_ms"`
	// ITLMs is the inter-token-latency target in milliseconds (alias itl).
	ITLMs float64 `yaml:"itl_ms" json:"itl_ms"`

	// LoadPredictor is the traffic predictor: constant, arima, kalman or prophet.
	LoadPredictor string `yaml:"load_predictor" json:"load_predictor"`
	// LoadPredictorLog1p makes the predictor model log1p(y).
	LoadPredictorLog1p bool `yaml:"load_predictor_log1p" json:"load_predictor_log1p"`
	// ProphetWindowSize is the number of recent points the prophet predictor fits.
	ProphetWindowSize int `yaml:"prophet_window_size" json:"prophet_window_size"`
	// LoadPredictorWarmupTrace is a trace file (Mooncake JSONL, Azure CSV or BurstGPT CSV)
	// of the traffic before the planner started (taken to end when it starts), fed to the
	// predictors before live traffic; the ahead policy reads its newest 120 buckets (an hour
	// at a 60 s startup) into its traffic history. Every model's rows of a BurstGPT file are
	// read unless load_predictor_warmup_trace_model names one.
	LoadPredictorWarmupTrace *string `yaml:"load_predictor_warmup_trace" json:"load_predictor_warmup_trace,omitempty"`
	// LoadPredictorWarmupTraceModel (extension) keeps one model's rows of a BurstGPT
	// load_predictor_warmup_trace (its Model column, e.g. GPT-4; spaces around it trimmed;
	// at most 256 bytes); arrival times then start from that model's first request. Needs
	// load_predictor_warmup_trace; a trace of another format, or without a row of the model,
	// is an error when it is read.
	LoadPredictorWarmupTraceModel *string `yaml:"load_predictor_warmup_trace_model" json:"load_predictor_warmup_trace_model,omitempty"`
	// KalmanQLevel is the Kalman predictor's level process noise.
	KalmanQLevel float64 `yaml:"kalman_q_level" json:"kalman_q_level"`
	// KalmanQTrend is the Kalman predictor's trend process noise.
	KalmanQTrend float64 `yaml:"kalman_q_trend" json:"kalman_q_trend"`
	// KalmanR is the Kalman predictor's measurement noise.
	KalmanR float64 `yaml:"kalman_r" json:"kalman_r"`
	// KalmanMinPoints is how many points the Kalman predictor needs before forecasting.
	KalmanMinPoints int `yaml:"kalman_min_points" json:"kalman_min_points"`
	// LoadPredictorHistorySize (extension) caps the points each predictor retains, which
	// keeps the workflow state small. Dynamo keeps an unbounded buffer.
	LoadPredictorHistorySize int `yaml:"load_predictor_history_size" json:"load_predictor_history_size"`

	// MetricPullingPrometheusEndpoint is the Prometheus server the traffic is read from (env
	// PROMETHEUS_ENDPOINT).
	MetricPullingPrometheusEndpoint string `yaml:"metric_pulling_prometheus_endpoint" json:"metric_pulling_prometheus_endpoint"`
	// MetricPullingPrometheusToken is a bearer token for Prometheus (env PROMETHEUS_TOKEN).
	MetricPullingPrometheusToken *string `yaml:"metric_pulling_prometheus_token" json:"metric_pulling_prometheus_token,omitempty"`
	// MetricPullingPrometheusTokenFile is a file holding the bearer token, re-read before every
	// query (env PROMETHEUS_TOKEN_FILE).
	MetricPullingPrometheusTokenFile *string `yaml:"metric_pulling_prometheus_token_file" json:"metric_pulling_prometheus_token_file,omitempty"`
	// MetricPullingPrometheusSSLVerify verifies Prometheus' TLS certificate (env
	// PROMETHEUS_SSL_VERIFY in {1,true,yes}).
	MetricPullingPrometheusSSLVerify bool `yaml:"metric_pulling_prometheus_ssl_verify" json:"metric_pulling_prometheus_ssl_verify"`
	// MetricPullingPrometheusExtraQueryParams are appended to every Prometheus query (env
	// PROMETHEUS_EXTRA_QUERY_PARAMS, a URL query string).
	MetricPullingPrometheusExtraQueryParams map[string]string `yaml:"metric_pulling_prometheus_extra_query_params" json:"metric_pulling_prometheus_extra_query_params,omitempty"`
	// MetricPullingPrometheusCABundle is a CA bundle file; setting it enables verification
	// (env PROMETHEUS_CA_BUNDLE).
	MetricPullingPrometheusCABundle *string `yaml:"metric_pulling_prometheus_ca_bundle" json:"metric_pulling_prometheus_ca_bundle,omitempty"`
	// MetricPullingPrometheusRequestTimeoutSeconds bounds each Prometheus request (env
	// DYN_PLANNER_PROMETHEUS_REQUEST_TIMEOUT_SECONDS).
	MetricPullingPrometheusRequestTimeoutSeconds float64 `yaml:"metric_pulling_prometheus_request_timeout_seconds" json:"metric_pulling_prometheus_request_timeout_seconds"`
	// MetricReportingPrometheusPort is Dynamo's planner metrics port (env
	// PLANNER_PROMETHEUS_PORT); accepted for compatibility, the worker serves /metrics on its
	// own flag.
	MetricReportingPrometheusPort int `yaml:"metric_reporting_prometheus_port" json:"metric_reporting_prometheus_port"`
	// ThroughputMetricsSource is where traffic is read: frontend or router metrics.
	ThroughputMetricsSource string `yaml:"throughput_metrics_source" json:"throughput_metrics_source"`
	// ModelName filters the Prometheus series; Kubernetes auto-detects it when unset.
	ModelName *string `yaml:"model_name" json:"model_name,omitempty"`
	// GlobalPlannerNamespace is required by environment global-planner (not supported here).
	GlobalPlannerNamespace *string `yaml:"global_planner_namespace" json:"global_planner_namespace,omitempty"`

	// EnableThroughputScaling turns on the slow, predictive loop.
	EnableThroughputScaling bool `yaml:"enable_throughput_scaling" json:"enable_throughput_scaling"`
	// EnableLoadScaling turns on the fast, FPM-driven loop.
	EnableLoadScaling bool `yaml:"enable_load_scaling" json:"enable_load_scaling"`
	// LoadAdjustmentIntervalSeconds is the load loop's period (alias load_adjustment_interval).
	LoadAdjustmentIntervalSeconds int `yaml:"load_adjustment_interval_seconds" json:"load_adjustment_interval_seconds"`
	// MaxNumFPMSamples is how many FPM iterations the regression retains.
	MaxNumFPMSamples int `yaml:"max_num_fpm_samples" json:"max_num_fpm_samples"`
	// FPMSampleBucketSize is the number of retention buckets (a perfect square: 2-D models
	// use its square root per axis).
	FPMSampleBucketSize int `yaml:"fpm_sample_bucket_size" json:"fpm_sample_bucket_size"`
	// LoadScalingDownSensitivity (0–100) is the share of the SLA headroom a scale-down may use.
	LoadScalingDownSensitivity int `yaml:"load_scaling_down_sensitivity" json:"load_scaling_down_sensitivity"`
	// PrefillScaleUpQueueTokens is target load's prefill scale-up threshold (queued tokens).
	PrefillScaleUpQueueTokens *int `yaml:"prefill_scale_up_queue_tokens" json:"prefill_scale_up_queue_tokens,omitempty"`
	// PrefillScaleDownQueueTokens is target load's prefill scale-down threshold (queued tokens).
	PrefillScaleDownQueueTokens *int `yaml:"prefill_scale_down_queue_tokens" json:"prefill_scale_down_queue_tokens,omitempty"`
	// DecodeScaleUpKVRate is target load's decode scale-up threshold (KV utilisation, percent).
	DecodeScaleUpKVRate *float64 `yaml:"decode_scale_up_kv_rate" json:"decode_scale_up_kv_rate,omitempty"`
	// DecodeScaleDownKVRate is target load's decode scale-down threshold (KV utilisation, percent).
	DecodeScaleDownKVRate *float64 `yaml:"decode_scale_down_kv_rate" json:"decode_scale_down_kv_rate,omitempty"`
	// LoadMinObservations is how many regression samples a perf model needs before it is used.
	LoadMinObservations int `yaml:"load_min_observations" json:"load_min_observations"`
	// SpeculativeNextn is the speculative-decoding draft length when the workers do not report it.
	SpeculativeNextn int `yaml:"speculative_nextn" json:"speculative_nextn"`
	// Advisory computes and records decisions but never applies them (older Dynamo configs
	// call it no_operation).
	Advisory bool `yaml:"advisory" json:"advisory"`
	// LoadMetricSamples is a setting of Dynamo's older load planner; accepted so such config
	// files load, and ignored.
	LoadMetricSamples *int `yaml:"load_metric_samples" json:"load_metric_samples,omitempty"`
	// DecodeScaleDownHoldIntervals (extension, threshold targets) forbids a decode scale-down
	// for this many load intervals after a decode scale-up; Dynamo's older load planner used 3.
	// 0 disables the rule.
	DecodeScaleDownHoldIntervals int `yaml:"decode_scale_down_hold_intervals" json:"decode_scale_down_hold_intervals"`
	// PrefillScaleUpTrendIntervals (extension, threshold targets) skips a prefill scale-up when
	// the prefill queue's current trend brings it under the scale-up threshold within this many
	// load intervals; Dynamo's older load planner used 3. 0 disables the rule.
	PrefillScaleUpTrendIntervals int `yaml:"prefill_scale_up_trend_intervals" json:"prefill_scale_up_trend_intervals"`
	// ScaleDownStabilizationSeconds (extension, every target) is Kubernetes HPA's scale-down
	// stabilization window: a pool is scaled down only to the highest count the planner
	// recommended for it within this many seconds (each tick's target, or the ready count when
	// it held), so a scale-down needs a down signal sustained over the window and never
	// follows a scale-up sooner. Nothing is held above max_gpu_budget. 0 (Dynamo's behaviour)
	// disables it; at most 3600.
	ScaleDownStabilizationSeconds int `yaml:"scale_down_stabilization_seconds" json:"scale_down_stabilization_seconds,omitempty"`
	// ScalingPolicy (extension) is "dynamo" (the default: Dynamo's loops, exactly) or "ahead"
	// (this planner's own policy, see PolicyAhead). With "ahead" the throughput loop, the
	// predictor settings and the load loop's thresholds are not used.
	ScalingPolicy ScalingPolicy `yaml:"scaling_policy" json:"scaling_policy,omitempty"`
	// ExpectedStartupSeconds (extension, scaling_policy ahead) is the startup delay of a new
	// engine assumed until the planner has measured one (from a scale-up's decision to the
	// engines' readiness; the measurements are kept in state). 1..3600, default 60.
	ExpectedStartupSeconds int `yaml:"expected_startup_seconds" json:"expected_startup_seconds,omitempty"`
	// ThroughputSizing (extension) selects capacity_search (Dynamo's current method) or
	// interpolation (Dynamo's classic profile interpolation with correction factors).
	ThroughputSizing ThroughputSizing `yaml:"throughput_sizing" json:"throughput_sizing"`
	// NoCorrection (extension, interpolation sizing) disables the correction factors, as
	// Dynamo's classic --no-correction flag.
	NoCorrection bool `yaml:"no_correction" json:"no_correction"`

	// EnablePowerAwareness turns on Dynamo's GPU power budget: not supported here.
	EnablePowerAwareness bool `yaml:"enable_power_awareness" json:"enable_power_awareness"`
	// TotalGPUPowerLimit is the power budget in watts (with EnablePowerAwareness).
	TotalGPUPowerLimit *int `yaml:"total_gpu_power_limit" json:"total_gpu_power_limit,omitempty"`

	// ReportIntervalHours is Dynamo's HTML report period; accepted for compatibility and
	// ignored (the workflow keeps diagnostics; `planner report` writes a running planner's
	// report on demand).
	ReportIntervalHours *float64 `yaml:"report_interval_hours" json:"report_interval_hours,omitempty"`
	// ReportOutputDir is where Dynamo writes reports; accepted and ignored.
	ReportOutputDir string `yaml:"report_output_dir" json:"report_output_dir"`
	// ReportFilename is a fixed report name; accepted and ignored.
	ReportFilename *string `yaml:"report_filename" json:"report_filename,omitempty"`
	// ReportWriteGzipLog writes the report's JSONL sidecar; accepted and ignored.
	ReportWriteGzipLog bool `yaml:"report_write_gzip_log" json:"report_write_gzip_log"`
	// LiveDashboardPort is Dynamo's live dashboard port; accepted and ignored (the Temporal Web
	// UI shows each planner).
	LiveDashboardPort int `yaml:"live_dashboard_port" json:"live_dashboard_port"`

	// Scheduling holds the tick settings.
	Scheduling Scheduling `yaml:"scheduling" json:"scheduling"`
	// PluginRegistration configures Dynamo's external-plugin registry; accepted and ignored
	// (external plugins are not supported).
	PluginRegistration map[string]any `yaml:"plugin_registration" json:"plugin_registration,omitempty"`
}

// AppliesNothing reports whether decisions are only recorded: advisory mode, or the noop
// environment (which records them and changes nothing). Such a planner keeps no
// pending-desired memory, since the deployment will never move towards its decisions.
func (c Config) AppliesNothing() bool { return c.Advisory || c.Environment == EnvNoop }

// Scheduling is Dynamo's SchedulingConfig.
type Scheduling struct {
	// TickMaxDurationSeconds bounds one whole tick.
	TickMaxDurationSeconds float64 `yaml:"tick_max_duration_seconds" json:"tick_max_duration_seconds"`
	// ExternalPlugins lists Dynamo gRPC plugins: not supported here (an error when non-empty).
	ExternalPlugins []any `yaml:"external_plugins" json:"external_plugins,omitempty"`
	// Gateway is Dynamo's plugin registration gateway: not supported (an error when enabled).
	Gateway Gateway `yaml:"gateway" json:"gateway"`
	// ScaleIntervalSeconds is the pipeline period; when unset it is the gcd of the builtin
	// intervals (see Resolve).
	ScaleIntervalSeconds *float64 `yaml:"scale_interval_seconds" json:"scale_interval_seconds,omitempty"`
}

// Gateway is Dynamo's plugin registration gateway configuration.
type Gateway struct {
	// Enabled turns the gateway on (not supported here).
	Enabled bool `yaml:"enabled" json:"enabled"`
	// Listen is the gateway's listen address.
	Listen string `yaml:"listen" json:"listen"`
	// AllowInsecure allows a non-unix listener without TLS.
	AllowInsecure bool `yaml:"allow_insecure" json:"allow_insecure"`
}

// Default values (Dynamo's SLAPlannerDefaults) that other packages and tests refer to.
const (
	DefaultNamespace                 = "dynamo"
	DefaultPrometheusEndpoint        = "http://prometheus-kube-prometheus-prometheus.monitoring.svc.cluster.local:9090"
	DefaultThroughputIntervalSeconds = 180
	DefaultLoadIntervalSeconds       = 5
	DefaultTTFTMs                    = 500.0
	DefaultITLMs                     = 50.0
	DefaultGatewayListen             = "unix:///var/run/dynamo/planner/registry.sock"
	DefaultPredictorHistorySize      = 256
	// MaxStabilizationSeconds bounds scale_down_stabilization_seconds (HPA's limit).
	MaxStabilizationSeconds = 3600
)

// Default returns the configuration with every default of Dynamo's PlannerConfig (without
// reading the environment; see DefaultFromEnv).
func Default() Config {
	report := 24.0
	return Config{
		PreDeploymentSweepingMode:           "rapid",
		Environment:                         EnvKubernetes,
		Namespace:                           DefaultNamespace,
		Backend:                             BackendVLLM,
		Mode:                                ModeDisagg,
		OptimizationTarget:                  TargetThroughput,
		ThroughputAdjustmentIntervalSeconds: DefaultThroughputIntervalSeconds,
		MaxThroughputScalingReplicas:        8,
		MaxGPUBudget:                        8,
		MinGPUBudget:                        -1,
		MinEndpoint:                         1,
		ControlAPIPort:                      9086,
		ProfileResultsDir:                   "profiling_results",
		TTFTMs:                              DefaultTTFTMs,
		ITLMs:                               DefaultITLMs,
		LoadPredictor:                       PredictorARIMA,
		ProphetWindowSize:                   50,
		KalmanQLevel:                        1.0,
		KalmanQTrend:                        0.1,
		KalmanR:                             10.0,
		KalmanMinPoints:                     5,
		LoadPredictorHistorySize:            DefaultPredictorHistorySize,
		MetricPullingPrometheusEndpoint:     DefaultPrometheusEndpoint,
		MetricPullingPrometheusRequestTimeoutSeconds: 10.0,
		ThroughputMetricsSource:                      "frontend",
		EnableThroughputScaling:                      true,
		LoadAdjustmentIntervalSeconds:                DefaultLoadIntervalSeconds,
		MaxNumFPMSamples:                             64,
		FPMSampleBucketSize:                          16,
		LoadScalingDownSensitivity:                   80,
		LoadMinObservations:                          5,
		ThroughputSizing:                             SizingCapacitySearch,
		ReportIntervalHours:                          &report,
		ReportOutputDir:                              "./planner_reports",
		ReportWriteGzipLog:                           true,
		LiveDashboardPort:                            8080,
		Scheduling: Scheduling{
			TickMaxDurationSeconds: 30.0,
			Gateway:                Gateway{Listen: DefaultGatewayListen},
		},
	}
}
