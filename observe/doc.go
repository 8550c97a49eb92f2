// Package observe reads the world for the planner: traffic, per-engine Forward Pass Metrics
// and (for tests and demos) scripted observations. It is pure of Temporal; the activities
// package adapts it.
//
// This source is Script: observations keyed by tick number, for deterministic runs
// (the durability test, examples). The Prometheus traffic client and the ZeroMQ FPM
// subscriber arrive with the simulated deployment.
package observe
