// Package replaytests keeps recorded histories of real planner runs on the Temporal dev
// server and replays them against the current workflow code: a change that would break a
// running planner fails here (TMPRL1100 non-determinism) before it ships. Every workflow
// logic version has at least one history (a test checks). Re-record with
// `make capture-histories` after a deliberate, versioned change.
package replaytests
