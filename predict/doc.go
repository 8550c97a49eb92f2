// Package predict holds the load predictors of the throughput loop (constant, ARIMA, Kalman,
// Prophet-style), the rules they share, and warm-up from request trace files.
//
// The predictors reimplement Dynamo's core/load/predictors.py (reference/dynamo-planner.md
// §5). One Predictor per series (request count, ISL, OSL): each throughput tick Adds the
// observation and asks Predict for the next interval. Every predictor is deterministic and
// serialisable: State is a compact JSON-friendly snapshot (the retained points plus a few
// numbers) that lives in the planner workflow's state, and Restore rebuilds a predictor that
// gives bit-identical forecasts.
//
// # Shared rules (Dynamo BasePredictor)
//
//   - Add: NaN and ±Inf become 0; zeros are dropped until a non-zero value has been seen since
//     the last ResetIdleSkip (the initial idle period is skipped; Warmup calls ResetIdleSkip
//     so live leading zeros are skipped again).
//   - Every forecast is clamped at >= 0. With Options.Log1p the arima, kalman and prophet
//     predictors model log1p(max(0, y)) and return max(0, expm1(f)).
//   - A predictor that cannot use its model answers the last value (0 with no data) and says
//     why in Forecast.Fallback.
//   - Options.MaxHistory (default 256) bounds the retained points of every kind, to keep
//     State small; Dynamo's buffers are unbounded. ARIMA updates and Prophet windows only see
//     retained points.
//
// # constant
//
// The last value.
//
// # kalman
//
// Exactly Dynamo's filter (filterpy KalmanFilter semantics): local linear trend
// F = [[1,1],[0,1]], H = [1,0], P0 = 1000·I, R = max(1e-9, KalmanR), Q = diag(max(1e-12,
// KalmanQLevel), max(1e-12, KalmanQTrend)). The first stored point sets x = [z, 0]; each later
// point runs predict() (unless Predict already ran it and cached the forecast) and update(z),
// with the Joseph-form covariance update. Predict returns the last value until
// KalmanMinPoints points are stored, then the level after one predict() step, cached so that
// repeated calls do not advance the filter. The §5 test vectors pass to 3 decimals.
//
// # arima
//
// Dynamo's wrapper: fewer than 5 retained points -> last value; all retained values
// identical -> that value; the first fit runs auto_arima in the requested space (raw or
// log1p); when a raw-space fit selects an (0,d,0) order, the predictor refits on log1p(y) and
// stays in log mode for good; later Predict calls do not search again but update the model
// with the points added since (pmdarima's model.update: the order is kept and the parameters
// are re-estimated on the longer series, starting from the previous ones, with at most
// max(5, new points / 10) iterations); the forecast is one step ahead; any failure -> last
// value with Fallback set. As in Dynamo, the order is chosen once, at the first fit: without
// warm-up that is at the fifth point, where the search usually ends on (0,d,0) and so in log
// mode; eval-predictors shows the effect.
//
// The order search follows pmdarima.auto_arima with Dynamo's arguments (non-seasonal, m=1):
//
//   - a constant series gives ARIMA(0,0,0) with its value as the mean;
//   - max_p = max_q = min(5, floor(n/3)); start_p = start_q = min(2, max) (at most 1 when
//     n < 10);
//   - d = ndiffs(y, test='kpss', alpha=0.05, max_d=2): KPSS level test with the short lag
//     trunc(3·sqrt(n)/13), Newey-West long-run variance and the p-value interpolated on
//     (0.347, 0.463, 0.574, 0.739) -> (0.10, 0.05, 0.025, 0.01), clamped at the ends;
//     difference while p < 0.05 and d < 2, stopping at once if the differenced series is
//     constant (then the model is (0,d,0), with a constant when d < 2);
//   - with_intercept "auto": an intercept when d is 0 or 1 (a mean for d=0, a drift for d=1);
//   - the stepwise search of pmdarima's _StepwiseFitWrapper: (start_p,d,start_q), (0,d,0),
//     (1,d,0), (0,d,1), then (0,d,0) without intercept; then, while new fits are made (at most
//     100), the moves p-1, q-1, p+1, q+1, (p-1,q-1), (p-1,q+1), (p+1,q-1), (p+1,q+1) and
//     finally the same order with the intercept toggled, around the current best, restarting
//     after the first move that lowers the AIC. Every move restarts the loop: that is what
//     pmdarima's source does (all its moves `continue`, and its last move toggles the
//     intercept). An (order, intercept) already fitted is not refitted, failed fits are
//     skipped, and a model whose AR or MA inverse roots reach a modulus above 1 - 1e-2 scores
//     AIC = +Inf. The best model is the lowest AIC (ties: the first fitted).
//
// Fitting departs from statsmodels, which pmdarima uses (exact state-space likelihood for
// every candidate, L-BFGS, maxiter 50). Here:
//
//   - Every candidate is fitted by conditional sum of squares (CSS) on the differenced series
//     w (length m = n - d): residuals e_t = z_t - Σφ_i z_{t-i} - Σθ_j e_{t-j} for t = p..m-1
//     with e_t = 0 before p and z = w - μ; the mean μ is profiled out in closed form (e is
//     affine in μ). AR and MA coefficients are kept stationary and invertible by statsmodels'
//     reparametrisation (constrain_stationary_univariate: partial autocorrelations
//     x/sqrt(1+x²) through the Durbin-Levinson recursion, negated for the MA side), and ½·log
//     SSR is minimised over the unconstrained parameters, from zeros, by an in-package L-BFGS
//     (memory 10, Armijo backtracking, scipy's stopping rules pgtol 1e-5 and factr 1e7, at most
//     50 iterations) with the analytic gradient. gonum/optimize's L-BFGS does the same
//     mathematics but routes every evaluation through goroutines and channels, which cost
//     more than the objective here. A candidate needs m - p > p + q + c residual degrees of
//     freedom (c = 1 with an intercept); otherwise it counts as a failed fit.
//   - A candidate is scored with the exact Gaussian likelihood at its CSS parameters: the
//     Kalman filter of the Harvey state-space form of the ARMA on w, started from the
//     stationary covariance (doubling algorithm), with μ its GLS estimate and the innovation
//     variance concentrated out (σ̂² = Σ v_t²/F_t / m):
//     AIC = m·(log(2π·σ̂²) + 1) + Σ log F_t + 2·(p + q + c + 1), c = 1 with an intercept. This
//     is statsmodels' AIC (σ² counts as a parameter) evaluated at CSS rather than maximum-
//     likelihood estimates; differencing costs the first d observations, as statsmodels'
//     diffuse initialisation does.
//   - The selected model is then refitted by maximum likelihood on that same exact likelihood
//     (μ and σ² profiled, forward-difference gradients, the same L-BFGS) from its CSS
//     estimate, for at most 20 iterations; updates (model.update) do the same from the
//     previous parameters with pmdarima's max(5, new points / 10) iterations.
//   - The forecast is the Kalman filter's one-step prediction of the next w value (with the
//     model's mean), integrated back d times.
//
// Against statsmodels 0.13 (SARIMAX, lbfgs), with which pmdarima fits: the exact likelihood
// is the same function (AIC of a given order, fitted to convergence, within 2e-3, ours
// never worse); a statsmodels-based replica of the stepwise search picked the same (p,d,q) as
// this package on 10 of 21 test series (9 with the same intercept; all the random-walk and
// moving-average-like series agree, forecasts within 1e-5 relative), and other orders on
// oscillating series and on the traces' bursty counts, where statsmodels itself mostly stops
// at maxiter 50 before converging and CSS-scored candidates rank differently. The whole search takes about 1 ms on 50 points (BenchmarkARIMAFit50;
// 3.7 ms at worst over 512 fits of 50-point windows of the shared traces, raw and log1p).
//
// # prophet
//
// Named prophet for configuration compatibility, this is a Prophet-style model, not Meta's
// Prophet (no Stan, no uncertainty intervals, no holidays). Like Dynamo's wrapper it fits the
// last ProphetWindow points (>= 5 points, else the last value), with timestamps
// 2024-01-01T00:00:00Z + step·StepSeconds where the step counter advances only when a point is
// stored, refits on every Predict, and forecasts the next step. The model follows Prophet's
// defaults where they apply: y scaled by max |y|, time scaled to [0, 1] over the window; a
// piecewise-linear trend (offset m, rate k, rate changes δ_j at changepoints s_j:
// trend(t) = m + k·t + Σ δ_j·max(0, t - s_j)) with n_changepoints = min(25, hist_size - 1),
// hist_size = floor(0.8·n), placed at round-half-even(linspace(0, hist_size-1, n_cp+1)),
// the first dropped; additive Fourier seasonalities enabled as Prophet enables them (daily
// when the window spans >= 2 days with sub-daily steps, weekly >= 2 weeks, yearly >= 2 years;
// orders 4, 3, 10). The fit is the maximum a posteriori estimate under Gaussian priors, by
// regularised least squares (gonum): m, k ~ N(0, 5²), seasonal coefficients ~ N(0, 10²) and
// changepoint deltas ~ N(0, 0.05²): an L2 (ridge) penalty where Prophet uses a Laplace(0,
// 0.05) (L1) prior. The noise σ has Prophet's half-normal(0, 0.5) prior; θ and σ² are found
// by alternating the ridge solve (X'X + σ²·Λ)θ = X'y with the closed-form optimum of σ² given
// θ, starting from σ = 1, until σ² changes by less than 1e-9 relative (at most 100 rounds).
//
// # Traces
//
// ReadTrace reads Mooncake JSONL, Azure LLM inference CSV and BurstGPT CSV traces
// (optionally gzipped), Bucket groups requests into throughput-interval windows with empty
// windows kept as zero rows (Dynamo's trace_data), and Warmup feeds the windows to the
// predictors (an empty window adds a zero count and carries the last ISL/OSL, as the live
// loop does) and then calls ResetIdleSkip. ServeGen's aggregate rate CSV is read by ReadServeGenAggregate.
package predict
