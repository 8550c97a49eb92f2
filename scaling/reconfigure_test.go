package scaling

import (
	"testing"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/predict"
	"github.com/stretchr/testify/require"
)

// TestLoweredSettingsKeepDeciding runs a planner for 200 ticks, then lowers every setting
// that sizes its state (as update_config may) and checks the next ticks still decide: the
// state carried over is trimmed, never a permanent failure.
func TestLoweredSettingsKeepDeciding(t *testing.T) {
	for _, kind := range []string{config.PredictorConstant, config.PredictorARIMA, config.PredictorKalman, config.PredictorProphet} {
		t.Run(kind, func(t *testing.T) {
			base := func(c *config.Config) {
				c.EnableLoadScaling, c.MaxGPUBudget, c.ThroughputAdjustmentIntervalSeconds = true, -1, 30
				c.LoadPredictor = kind
			}
			p := mustPlanner(t, slaConfig(base))
			boot := Bootstrap{PrefillFPMs: linearPrefillFPMs(1e-5, 0.002, 500, 1000, 1500), DecodeFPMs: linearDecodeFPMs(1e-6, 0.005)}
			caps := WorkerCapabilities{Prefill: &EngineCapabilities{MaxNumBatchedTokens: 8192}, Decode: &EngineCapabilities{MaxKVTokens: 1_000_000, MaxNumSeqs: 256}}
			st := mustInit(t, p, 0, boot)
			step := func(p *Planner, i int) {
				tk := p.NextTick(st)
				in := Input{Now: tk.At, Workers: counts(1, 1), Capabilities: caps,
					FPM: &FPMObservations{
						Prefill: []perf.FPM{prefillEngine("p0", int64(i%7)*3000)},
						Decode:  []perf.FPM{decodeEngine("d0", int64(5+i%4), int64(5000+i*700), 0)},
					}}
				if tk.NeedTraffic {
					in.Traffic = traffic(tk.TrafficDurationS, float64(100+i*10), 1000, 200)
				}
				next, _, diag, err := p.Decide(st, in)
				require.NoError(t, err, "tick %d", i)
				require.NotEqual(t, ReasonPredictFailed, diag.ThroughputReason, "tick %d: %v", i, diag.Notes)
				st = next
			}
			for i := 0; i < 200; i++ {
				step(p, i)
			}
			lowered := mustPlanner(t, slaConfig(func(c *config.Config) {
				base(c)
				c.LoadPredictorHistorySize, c.ProphetWindowSize, c.KalmanMinPoints = 5, 5, 5
				c.MaxNumFPMSamples, c.FPMSampleBucketSize, c.LoadMinObservations = 1, 1, 1
			}))
			for i := 200; i < 260; i++ {
				step(lowered, i)
			}
			require.LessOrEqual(t, len(st.Predictors.NumReq.Values), 5, "the history is trimmed to the lowered size")
		})
	}
}

func TestHistoryBoundAgreesWithPredictor(t *testing.T) {
	require.Equal(t, predict.MaxMaxHistory, config.MaxHistoryPoints)
}
