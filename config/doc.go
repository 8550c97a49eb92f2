// Package config defines the planner configuration: every field of Dynamo's PlannerConfig
// that applies to this planner, with Dynamo's defaults, strict YAML/JSON loading that
// accepts a Dynamo planner config file unchanged, and Validate, which reports every problem
// with its field path.
package config
