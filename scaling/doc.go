// Package scaling is the pure decision core of the planner: tick schedule, throughput
// sizing, load decisions, GPU-budget guards, decision reasons and per-tick diagnostics.
// It does no I/O and reads no clock: Decide takes a state and the tick's observations and
// returns the next state, the decision and the diagnostics.
package scaling
