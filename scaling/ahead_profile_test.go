package scaling

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
)

// The profile's decode batch within the ITL SLA is the last batch, counting up from one
// request, whose interpolated iteration time is within it: the next one is over it (or
// beyond the KV capacity).
func TestProfileDecodeBatch(t *testing.T) {
	prof, err := perf.LoadProfile("../sim/engine/testdata") // the demo's profile
	require.NoError(t, err)
	p, err := New(slaConfig(nil), prof)
	require.NoError(t, err)
	di, err := perf.NewDecodeInterpolator(prof.Decode)
	require.NoError(t, err)
	kv := float64(prof.Decode.MaxKVTokens)
	itlAt := func(n, ctx float64) float64 { v, _ := di.At(n*ctx/kv, ctx); return v }

	for _, tc := range []struct {
		name             string
		ctx, itl, accept float64
		want             float64 // exact, when no range (atLeast, atMost) is given
		atLeast, atMost  float64 // a range, and the edge checked: the next batch is over the SLA
	}{
		{name: "the demo's context (ISL 2,048, OSL 28) at 10 ms", ctx: 2062, itl: 10, accept: 1, atLeast: 15, atMost: 25},
		{name: "a short context at 10 ms", ctx: 514, itl: 10, accept: 1, atLeast: 50, atMost: 90},
		{name: "a looser SLA holds more", ctx: 2062, itl: 25, accept: 1, atLeast: 60},
		{name: "speculative decoding: the iteration may take accept × the ITL", ctx: 2062, itl: 5, accept: 2, atLeast: 15, atMost: 25},
		{name: "an SLA under the one-request ITL: nothing", ctx: 2062, itl: 4, accept: 1, want: 0},
		{name: "no context: nothing", ctx: 0, itl: 10, accept: 1, want: 0},
		{name: "no SLA: nothing", ctx: 2062, itl: 0, accept: 1, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := p.profileDecodeBatch(tc.ctx, tc.itl, tc.accept)
			if tc.atLeast == 0 && tc.atMost == 0 {
				require.Equal(t, tc.want, n)
				return
			}
			require.GreaterOrEqual(t, n, tc.atLeast)
			if tc.atMost > 0 {
				require.LessOrEqual(t, n, tc.atMost)
			}
			limit := tc.itl * tc.accept
			for b := 1.0; b <= n; b++ {
				require.LessOrEqual(t, itlAt(b, tc.ctx), limit, "batch %v within the SLA", b)
			}
			require.Greater(t, itlAt(n+1, tc.ctx), limit, "the next batch is over it")
		})
	}

	// Without a profile there is no measured batch.
	require.Zero(t, mustPlanner(t, slaConfig(nil)).profileDecodeBatch(2062, 10, 1))
}

// The cap applies only where the profile holds fewer requests than the perf model says.
func TestProfileDecodeCap(t *testing.T) {
	prof, err := perf.LoadProfile("../sim/engine/testdata")
	require.NoError(t, err)
	p, err := New(slaConfig(func(c *config.Config) { c.ITLMs = 10 }), prof)
	require.NoError(t, err)
	st := mustInit(t, p, 0, Bootstrap{})
	measured := p.profileDecodeBatch(2062, 10, 1)
	require.Positive(t, measured)

	for _, tc := range []struct {
		name    string
		p       *Planner
		b       float64
		want    float64
		changed bool
	}{
		{name: "the perf model says more: the profile's batch", p: p, b: 49, want: measured, changed: true},
		{name: "the perf model says less: its own", p: p, b: measured - 1, want: measured - 1},
		{name: "equal: unchanged", p: p, b: measured, want: measured},
		{name: "no profile: unchanged", p: mustPlanner(t, slaConfig(func(c *config.Config) { c.ITLMs = 10 })), b: 49, want: 49},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tk := newTick(tc.p, &st, 1, 1)
			b, source := tk.profileDecodeCap(tc.b, tk.profileBatch(2062), 2062, "at the ITL SLA")
			require.Equal(t, tc.want, b)
			if tc.changed {
				require.Contains(t, source, "as the profile measured it")
			} else {
				require.Equal(t, "at the ITL SLA", source)
			}
		})
	}
}

// A batch shown at one context vouches at another for no more than the profile's batch there,
// unless the engines ran more than the profile at their own context (then scaled by the
// profile's batches): the profile's surface is not monotonic in the context.
func TestShownDecodeBatch_HeldToTheProfile(t *testing.T) {
	prof, err := perf.LoadProfile("../sim/engine/testdata")
	require.NoError(t, err)
	withITL := slaConfig(func(c *config.Config) { c.ITLMs = 10 })
	p, err := New(withITL, prof)
	require.NoError(t, err)
	const ctx = 2112.0
	here, long, short := p.profileDecodeBatch(ctx, 10, 1), p.profileDecodeBatch(3000, 10, 1), p.profileDecodeBatch(1000, 10, 1)
	require.Greater(t, long, 1.5*here, "the profile holds far more requests at 3,000 tokens than at 2,112")
	require.Greater(t, short, here, "and more at 1,000 tokens")
	shown := func(n, perRequest float64) ShownBatch { return ShownBatch{N: n, KV: n * perRequest} }

	for _, tc := range []struct {
		name   string
		p      *Planner
		points []ShownBatch
		want   float64
		source string // a part of the reason given
	}{
		{name: "within the profile: 80% of the shown batch", p: p, points: []ShownBatch{shown(0.8*here, ctx)},
			want: 0.64 * here, source: "80% of a batch the engines ran within the ITL SLA"},
		{name: "a long-context batch within the profile there: held to the profile's batch here", p: p,
			points: []ShownBatch{shown(long-4, 3000)}, want: here, source: "held to the profile's"},
		{name: "1.2× the profile's batch at their own: not the 1.25× that raises it, the profile's batch here", p: p,
			points: []ShownBatch{shown(1.2*long, 3000)}, want: here, source: "held to the profile's"},
		{name: "twice the profile's batch at their own, longer context: 80% of twice the profile's batch here", p: p,
			points: []ShownBatch{shown(2*long, 3000)}, want: 0.8 * 2 * here, source: "they ran 2.00× the profile's batch at their own"},
		{name: "twice the profile's batch at a shorter context: at most the 80% it vouches for here", p: p,
			points: []ShownBatch{shown(2*short, 1000)}, want: 0.8 * 2 * short * 1000 / ctx, source: "they ran 2.00× the profile's batch at their own"},
		{name: "the most any point beat the profile by, each at its own context", p: p,
			points: []ShownBatch{shown(long-4, 3000), shown(1.5*short, 1000)}, want: 0.8 * 1.5 * here, source: "they ran 1.50× the profile's batch at their own"},
		{name: "the best of several points", p: p, points: []ShownBatch{shown(long-4, 3000), shown(0.8*here, ctx)},
			want: here, source: "held to the profile's"},
		{name: "no profile: 80% of the shown batch, whatever the context", p: mustPlanner(t, withITL),
			points: []ShownBatch{shown(long-4, 3000)}, want: 0.8 * (long - 4), source: "80% of a batch"},
		{name: "nothing shown", p: p, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := mustInit(t, tc.p, 0, Bootstrap{})
			st.Ahead = &AheadState{DecodeShown: tc.points}
			tk := newTick(tc.p, &st, 1, 1)
			b, source := tk.shownDecodeBatch(ctx, tk.profileBatch(ctx), tk.shownBeat)
			require.InDelta(t, tc.want, b, 1e-9)
			require.Contains(t, source, tc.source)
		})
	}
}
