// Package predict holds the load predictors of the throughput loop (constant, ARIMA, Kalman,
// Prophet-style), the rules they share, and warm-up from request trace files.
package predict
