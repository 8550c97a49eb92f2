// Package engine is a GPU-free model of one LLM inference engine (a vLLM-style scheduler),
// in the spirit of Dynamo's mocker (reference/evaluation.md §1). It is used two ways:
//
//   - offline: a virtual-clock trace replay calls Engine.Step(now) whenever the engine is
//     free and gets back the pass it ran (its duration, its Forward Pass Metrics and the
//     first-token and completion events at its end);
//   - live: Live runs an Engine in real time in a goroutine, for the `planner engine`
//     process that serves HTTP requests and publishes one FPM per pass.
//
// # Scheduling
//
// Each pass follows the mocker's vLLM core (§1.3). The token budget starts at
// Config.MaxNumBatchedTokens. Running requests are scheduled first, in admission order: a
// decoding request takes one token, an unfinished prefill (or a recompute after
// preemption) takes min(remaining, budget) tokens (chunked prefill). Waiting requests are
// then admitted first come, first served while fewer than MaxNumSeqs requests run, budget
// is left and no request was preempted in this pass. Without chunked prefill a prompt
// larger than the remaining budget blocks admission.
//
// KV memory is Config.NumGPUBlocks blocks of Config.BlockSize tokens; a request holds
// ceil(kv tokens / BlockSize) blocks, growing as it decodes. When a running request cannot
// get the blocks it needs, the newest running request is preempted (LIFO, vLLM's and the
// mocker's default): its blocks are freed, its computed tokens reset to zero and it goes
// back to the front of the waiting queue, to be recomputed (prompt and the tokens already
// generated) when it is admitted again. A waiting request that does not fit is not
// admitted (waiting requests never preempt).
//
// # Prefix cache
//
// With Config.EnablePrefixCaching, a prefill or aggregated engine keeps the KV of prompt
// blocks keyed by the requests' hash ids (Request.HashIDs, one per Config.HashBlockTokens
// = 512 prompt tokens, as in the Mooncake traces), like the mocker's KV manager (§1.2): a
// block referenced by a running request is active; when no running request references it
// any more it becomes inactive, kept for reuse and evicted least recently used first (a
// request's blocks are released last block first, so shared leading blocks outlive their
// tails). Inactive blocks only use KV memory that is free: an allocation evicts as many as
// it needs, so the cache never delays or preempts a request. When a waiting request is
// admitted, the longest leading run of its hash ids found in the cache (active or
// inactive) is its hit: those tokens, at most ISL − 1 (one token is always computed), are
// not computed again. They still hold KV blocks, and they are the pass's cached tokens in
// the prefill timing and the FPM's sum_prefill_kv_tokens. A request's blocks enter the
// cache when its prompt is computed. Simplifications: a block shared by two running
// requests is charged to both (conservative), the hash block is the unit (the last,
// partial block of a prompt is cached whole), and a preempted request drops its references
// and looks the cache up again when it is admitted again. Decode engines keep no cache
// (they receive the prompt's KV). Without hash ids, or with the cache off, nothing changes.
//
// A request's state is its sequence (prompt plus the tokens generated so far) and the
// number of its tokens whose KV is computed. When a pass computes the last token of the
// sequence, a new token is sampled: the first one is the first token (prefill done), the
// later ones are decode steps. Requests on a RolePrefill engine finish with their first
// token; on a RoleDecode engine they arrive with their prompt's KV already transferred
// (the prefill engine produced the first token) and generate the OSL−1 remaining tokens.
//
// # Timing
//
// A pass runs its prefill part, then its decode part (§1.3 item 5): duration =
// prefill_ms/SpeedupRatio + decode_ms/(SpeedupRatio·DecodeSpeedupRatio), both from a
// Timing: ProfileTiming (a measured pre-deployment profile) or PolynomialTiming (the
// mocker's built-in polynomial). Every token sampled in a pass is produced at the pass end.
//
// # Determinism and cost
//
// The model does no I/O, reads no clock and uses no randomness: the same submissions and
// Step times give the same passes. A pass costs O(running requests) and, in steady
// state, allocates nothing (request records are recycled and the event slice is reused).
// Only Live reads a clock.
package engine
