// Package observe reads the world for the planner: the frontend's traffic, the engines'
// Forward Pass Metrics. It is pure of Temporal; the activities package adapts it.
//
//   - FPM: DecodeFPM/AppendFPM are the wire codec (msgspec's msgpack map form, and the
//     positional form), FPMStore keeps the latest message per (worker_id, dp_rank) and a
//     bounded sample for the regression, and Subscriber reads the engines' ZeroMQ PUB
//     sockets into a store (Dynamo's §8 transport: 3 frames, 1 s idle heartbeat).
//   - Traffic: TrafficSource is what the throughput loop reads. PrometheusTraffic issues
//     Dynamo's frontend queries to a Prometheus server; ScrapeTraffic reads the frontend's
//     /metrics directly and computes window deltas, for setups without Prometheus.
package observe
