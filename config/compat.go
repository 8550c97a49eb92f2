package config

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// aliases maps Dynamo's alias keys to the canonical key (pydantic validation aliases, and
// the classic planner's no_operation).
var aliases = map[string]string{
	"ttft":                           "ttft_ms",
	"itl":                            "itl_ms",
	"throughput_adjustment_interval": "throughput_adjustment_interval_seconds",
	"load_adjustment_interval":       "load_adjustment_interval_seconds",
	"no_operation":                   "advisory",
}

// legacyOption is a setting of Dynamo's older planners (the classic SLA planner's and the
// load planner's argparse flags) that the current PlannerConfig has no key of that name for.
// Exactly one of to, warn-only (to == "") or refuse applies.
type legacyOption struct {
	// to is the current key the value is read as ("" with refuse empty: read as nothing).
	to string
	// fractionToPercent reads a 0..1 fraction as a 0..100 percentage (KV utilisation).
	fractionToPercent bool
	// note is the warning given when the option is set (with to: why the mapping is not
	// exact; without: why it is ignored).
	note string
	// refuse is the error given when the option is set: it has no equivalent here and
	// ignoring it would change what the planner does.
	refuse string
}

// legacyOptions are the older options, by their underscore spelling (a hyphen spelling,
// as the argparse flag was written, is read the same way).
var legacyOptions = map[string]legacyOption{
	// Classic SLA planner (G1) --adjustment-interval: its one (throughput) loop's period; the
	// G3 alias of the same loop is throughput_adjustment_interval.
	"adjustment_interval": {to: "throughput_adjustment_interval_seconds"},
	// Load planner: how often metrics were sampled within an adjustment interval.
	"metric_pulling_interval": {note: "Dynamo's older load planner sampled its metrics this often within an adjustment interval; " +
		"this planner reads each interval's traffic from Prometheus and the engines' Forward Pass Metrics as they arrive, so the option is ignored"},
	// Load planner: the mean KV-cache utilisation (a fraction) over the decode engines and the
	// adjustment interval that scaled decode up or down by one.
	"decode_kv_scale_up_threshold": {to: "decode_scale_up_kv_rate", fractionToPercent: true,
		note: "it is used only with optimization_target \"load\", where any decode engine at or over it scales up " +
			"(the older load planner compared the mean over all engines and the adjustment interval)"},
	"decode_kv_scale_down_threshold": {to: "decode_scale_down_kv_rate", fractionToPercent: true,
		note: "it is used only with optimization_target \"load\", where all decode engines at or under it scale down " +
			"(the older load planner compared the mean over all engines and the adjustment interval)"},
	// Load planner: thresholds on the number of requests waiting in the shared prefill queue.
	"prefill_queue_scale_up_threshold": {refuse: "Dynamo's older load planner compared the requests waiting in its shared prefill queue; " +
		"this planner's threshold is queued prefill tokens per engine, which has no conversion from it: " +
		"set prefill_scale_up_queue_tokens with optimization_target \"load\" instead"},
	"prefill_queue_scale_down_threshold": {refuse: "Dynamo's older load planner compared the requests waiting in its shared prefill queue; " +
		"this planner's threshold is queued prefill tokens per engine, which has no conversion from it: " +
		"set prefill_scale_down_queue_tokens with optimization_target \"load\" instead"},
	// Early classic planner: how many recent samples the predictor used.
	"load_prediction_window_size": {refuse: "Dynamo's early planner predicted from this many recent samples; this planner has no equivalent " +
		"(prophet_window_size is the prophet predictor's window, load_predictor_history_size caps every predictor's history): set one of those instead"},
}

// hyphenOnlyLegacy are older options whose underscore spelling is a current key with
// another meaning: only the argparse (hyphen) spelling is the older option.
var hyphenOnlyLegacy = map[string]legacyOption{
	"min-gpu-budget": {refuse: "Dynamo's older load planner's minimum GPUs per worker type has no equivalent here " +
		"(min_gpu_budget is a floor on the deployment's total GPUs): set min_endpoint, prefill_min_endpoint or decode_min_endpoint " +
		"(replicas), or min_gpu_budget"},
}

// spelling is how one top-level key was written and what it is read as.
type spelling struct {
	raw  string
	line int
	// how says which kind of other spelling it is ("" for the canonical key itself).
	how string
}

// normaliseKeys rewrites every top-level key to its canonical name (one of known): Dynamo's
// aliases, the argparse spelling with hyphens, and the older options it can map; older
// options it cannot map are errors (behaviour) or warnings (dropped). A key given twice under
// two spellings is an error. A key that is none of these keeps its spelling, for the
// unknown-key error. Warnings are appended to warns.
func normaliseKeys(m *yaml.Node, known map[string]reflect.StructField, errs *Errors, warns *[]string) {
	type entry struct {
		k, v  *yaml.Node
		canon string
		sp    spelling
		drop  bool
	}
	entries := make([]*entry, 0, len(m.Content)/2)
	warn := func(line int, key, msg string) {
		*warns = append(*warns, (&FieldError{Line: line, Field: key, Msg: msg}).Error())
	}
	fail := func(line int, key, msg string) {
		*errs = append(*errs, &FieldError{Line: line, Field: key, Msg: msg})
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		e := &entry{k: k, v: v, sp: spelling{raw: k.Value, line: k.Line}}
		entries = append(entries, e)
		if lo, ok := hyphenOnlyLegacy[k.Value]; ok {
			fail(k.Line, k.Value, lo.refuse)
			e.drop = true
			continue
		}
		name := strings.ReplaceAll(k.Value, "-", "_")
		if name != k.Value {
			e.sp.how = "its hyphenated spelling"
		}
		if lo, ok := legacyOptions[name]; ok {
			switch {
			case lo.refuse != "":
				fail(k.Line, k.Value, lo.refuse)
				e.drop = true
				continue
			case lo.to == "":
				warn(k.Line, k.Value, "ignored: "+lo.note)
				e.drop = true
				continue
			}
			e.sp.how = "Dynamo's older option"
			if lo.fractionToPercent {
				pct, err := fractionToPercent(v)
				if err != nil {
					fail(v.Line, k.Value, err.Error())
					e.drop = true
					continue
				}
				warn(k.Line, k.Value, fmt.Sprintf("Dynamo's older load planner's KV-cache utilisation fraction %s is read as %s %s (percent); %s", v.Value, lo.to, pct, lo.note))
				v.Tag, v.Value = "!!float", pct
			}
			name = lo.to
		}
		if canon, ok := aliases[name]; ok {
			if name == "ttft" || name == "itl" {
				if f, err := strconv.ParseFloat(v.Value, 64); err == nil && v.Kind == yaml.ScalarNode && f > 0 && f < 1 {
					warn(k.Line, k.Value, fmt.Sprintf("%v is read as milliseconds (%s); Dynamo's early planner took seconds here: write %g for %v s", f, canon, f*1000, f))
				}
			}
			e.sp.how = "its alias"
			name = canon
		}
		if _, ok := known[name]; !ok {
			name, e.sp.how = k.Value, "" // unknown: reported by check under its own spelling
		}
		e.canon = name
	}
	// A key given twice: the canonical spelling wins and the other spelling is the error;
	// between two other spellings, the first wins.
	first := map[string]spelling{}
	for _, e := range entries {
		if !e.drop && e.sp.how == "" {
			if _, dup := first[e.canon]; !dup {
				first[e.canon] = e.sp
			}
		}
	}
	kept := m.Content[:0]
	for _, e := range entries {
		if e.drop {
			continue
		}
		if prev, dup := first[e.canon]; dup && prev != e.sp {
			other := "as " + strconv.Quote(e.sp.raw)
			if e.sp.how != "" {
				other = "as " + e.sp.how + " " + strconv.Quote(e.sp.raw)
			}
			fail(e.k.Line, e.canon, fmt.Sprintf("given twice, as %q (line %d) and %s", prev.raw, prev.line, other))
			continue
		}
		first[e.canon] = e.sp
		e.k.Value = e.canon
		kept = append(kept, e.k, e.v)
	}
	m.Content = kept
}

// fractionToPercent reads a 0..1 fraction node as a percentage string.
func fractionToPercent(v *yaml.Node) (string, error) {
	if v.Kind != yaml.ScalarNode || (v.Tag != "!!int" && v.Tag != "!!float") {
		return "", fmt.Errorf("want a number (a KV-cache utilisation fraction within 0..1), got %s", describe(v))
	}
	f, err := strconv.ParseFloat(v.Value, 64)
	if err != nil || !(f >= 0 && f <= 1) {
		return "", fmt.Errorf("want a KV-cache utilisation fraction within 0..1 (Dynamo's older load planner), got %s", v.Value)
	}
	// 0.9 * 100 is 90.00000000000001 in binary; the operator wrote a decimal.
	pct, _ := strconv.ParseFloat(strconv.FormatFloat(f*100, 'g', 12, 64), 64)
	if math.IsNaN(pct) {
		return "", fmt.Errorf("want a number, got %s", v.Value)
	}
	return strconv.FormatFloat(pct, 'g', -1, 64), nil
}

// topLevelNames are the names a top-level key may be a typo of, beside Config's keys: the
// aliases and the older options, in their underscore spelling.
func topLevelNames() []string {
	names := make([]string, 0, len(aliases)+len(legacyOptions))
	for k := range aliases {
		names = append(names, k)
	}
	for k := range legacyOptions {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
