package predict

import (
	"fmt"
	"math"
)

// BacktestResult scores one-step-ahead forecasts over a series.
type BacktestResult struct {
	// Intervals counts the forecasts made (every value after the first).
	Intervals int `json:"intervals"`
	// Scored counts the forecasts whose actual value is > 0: the MAPE's.
	Scored int `json:"scored"`
	// MAPEPct is the mean absolute percentage error in percent (nil: nothing scored).
	MAPEPct *float64 `json:"mape_pct"`
	// MAE is the mean absolute error over every forecast.
	MAE float64 `json:"mae"`
	// Fallbacks counts the forecasts that were the last value (see Forecast.Fallback).
	Fallbacks int `json:"fallbacks"`
}

// Backtest forecasts every value of series from the values before it, online, with a new
// predictor built from o, and scores the forecasts.
func Backtest(o Options, series []float64) (BacktestResult, error) {
	p, err := New(o)
	if err != nil {
		return BacktestResult{}, err
	}
	var r BacktestResult
	var absErr, pctErr float64
	for i, actual := range series {
		if i > 0 {
			f, err := p.Predict()
			if err != nil {
				return BacktestResult{}, fmt.Errorf("interval %d: %w", i, err)
			}
			if f.Fallback != "" {
				r.Fallbacks++
			}
			r.Intervals++
			absErr += math.Abs(f.Value - actual)
			if actual > 0 {
				r.Scored++
				pctErr += math.Abs(f.Value-actual) / actual
			}
		}
		p.Add(actual)
	}
	if r.Intervals > 0 {
		r.MAE = absErr / float64(r.Intervals)
	}
	if r.Scored > 0 {
		m := 100 * pctErr / float64(r.Scored)
		r.MAPEPct = &m
	}
	return r, nil
}
