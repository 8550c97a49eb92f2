package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxFileBytes bounds a configuration file; anything larger is certainly not a planner config.
const MaxFileBytes = 1 << 20

// FieldError is one problem with one setting. Line is the 1-based line of the key in the
// source when known, else 0.
type FieldError struct {
	Line  int
	Field string
	Msg   string
}

// Error implements error.
func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in a configuration, in a stable order.
type Errors []*FieldError

// Error joins the problems one per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap exposes each problem to errors.Is and errors.As.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

func joinErrors(errs []error) error {
	es := make(Errors, 0, len(errs))
	for _, e := range errs {
		es = append(es, &FieldError{Msg: e.Error()})
	}
	return es
}

// Load reads a configuration the way Dynamo's --config does: arg is a path to a .json,
// .yaml or .yml file (any other suffix is read as JSON or YAML), or an inline JSON object.
// Environment-backed defaults come from env (nil: none). The result is resolved (easy-mode
// override, default scale interval) and validated; the error lists every problem. The
// warnings (one line each) name the settings that loaded but are not acted on as Dynamo
// would (see Parse); callers show them to the operator.
func Load(arg string, env LookupEnv) (Config, []string, error) {
	if s := strings.TrimSpace(arg); strings.HasPrefix(s, "{") {
		return parse([]byte(s), "inline JSON", true, env)
	}
	return LoadFile(arg, env)
}

// LoadFile reads, resolves and validates a configuration file; see Load.
func LoadFile(path string, env LookupEnv) (Config, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, nil, fmt.Errorf("planner config: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Config{}, nil, fmt.Errorf("planner config: %w", err)
	}
	if st.IsDir() {
		return Config{}, nil, fmt.Errorf("planner config %s: is a directory, want a .yaml, .yml or .json file", path)
	}
	if st.Size() > MaxFileBytes {
		return Config{}, nil, fmt.Errorf("planner config %s: %d bytes is larger than the %d-byte limit", path, st.Size(), MaxFileBytes)
	}
	data := make([]byte, st.Size())
	if _, err := f.ReadAt(data, 0); err != nil && st.Size() > 0 {
		return Config{}, nil, fmt.Errorf("planner config %s: %w", path, err)
	}
	return parse(data, path, strings.EqualFold(filepath.Ext(path), ".json"), env)
}

// Parse decodes a YAML or JSON configuration strictly, lays it over the defaults, resolves
// it and validates it. source names the input in messages.
//
// Top-level keys may be Dynamo's aliases or the argparse spelling with hyphens
// (max-gpu-budget); the older planners' options are read as their current key where one
// has the same meaning, and otherwise refused (when ignoring them would change what the
// planner does) or ignored with a warning. Unknown keys, wrong types and one setting given
// under two spellings are errors; an unknown key close to a known one names it. The
// warnings are the older options read or ignored, and Config.Warnings.
func Parse(data []byte, source string, env LookupEnv) (Config, []string, error) {
	return parse(data, source, false, env)
}

// parse is Parse; isJSON makes JSON syntax errors (which YAML might read past) errors, as
// Dynamo's json.loads would.
func parse(data []byte, source string, isJSON bool, env LookupEnv) (Config, []string, error) {
	if isJSON {
		if err := checkJSONSyntax(data); err != nil {
			return Config{}, nil, fmt.Errorf("planner config %s:\n%w", source, err)
		}
	}
	cfg, err := DefaultFromEnv(env)
	if err != nil {
		return Config{}, nil, fmt.Errorf("planner config defaults from the environment: %w", err)
	}
	lines, warns, err := decodeInto(data, &cfg)
	if err != nil {
		return Config{}, nil, fmt.Errorf("planner config %s:\n%w", source, err)
	}
	cfg.Resolve()
	err = cfg.Validate()
	if err == nil {
		err = cfg.CheckFiles()
	}
	if err != nil {
		var es Errors
		if errors.As(err, &es) {
			for _, e := range es {
				if e.Line == 0 {
					e.Line = lines[e.Field]
				}
			}
			sortByLine(es)
		}
		return Config{}, nil, fmt.Errorf("planner config %s:\n%w", source, err)
	}
	for _, w := range cfg.warnings(func(key string) bool { return lines[key] > 0 }) {
		line := 0
		for _, k := range w.keys {
			if l := lines[k]; l > 0 && (line == 0 || l < line) {
				line = l
			}
		}
		if line > 0 {
			w.text = fmt.Sprintf("line %d: %s", line, w.text)
		}
		warns = append(warns, w.text)
	}
	return cfg, warns, nil
}

// checkJSONSyntax reports a JSON syntax error with its line.
func checkJSONSyntax(data []byte) error {
	var v any
	err := json.Unmarshal(data, &v)
	if err == nil {
		return nil
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line := 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
		return Errors{{Line: line, Msg: "not valid JSON: " + se.Error()}}
	}
	return Errors{{Msg: "not valid JSON: " + err.Error()}}
}

// decodeInto checks the document against Config's shape and decodes it over cfg. It returns
// the source line of every key it saw, by field path, for later validation messages, and
// the warnings about older options.
func decodeInto(data []byte, cfg *Config) (map[string]int, []string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, nil, Errors{{Msg: "not valid YAML or JSON: " + strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	lines := map[string]int{}
	if doc.Kind == 0 { // empty document: all defaults
		return lines, nil, nil
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return lines, nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, nil, Errors{{Line: root.Line, Msg: "want a mapping of planner settings at the top level, got " + describe(root)}}
	}
	var errs Errors
	var warns []string
	normaliseKeys(root, yamlFields(reflect.TypeOf(*cfg)), &errs, &warns)
	check(root, reflect.TypeOf(*cfg), "", lines, &errs)
	if len(errs) > 0 {
		sortByLine(errs)
		return nil, nil, errs
	}
	if err := root.Decode(cfg); err != nil {
		return nil, nil, Errors{{Msg: strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	return lines, warns, nil
}

// check walks node against type t, collecting every problem: unknown keys, null for a
// required value, scalars of the wrong type. It normalises integral floats given for
// integer fields (180.0 -> 180), as pydantic accepts them.
func check(n *yaml.Node, t reflect.Type, path string, lines map[string]int, errs *Errors) {
	bad := func(msg string) {
		*errs = append(*errs, &FieldError{Line: n.Line, Field: path, Msg: msg})
	}
	if n.Kind == yaml.AliasNode {
		bad("YAML aliases (*name) are not supported")
		return
	}
	isNull := n.Kind == yaml.ScalarNode && n.Tag == "!!null"
	if t.Kind() == reflect.Pointer {
		if isNull {
			return
		}
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Interface:
		return // opaque values (Dynamo-only sections), checked by Validate
	case reflect.Map, reflect.Slice:
		if isNull {
			return
		}
		if t.Kind() == reflect.Map && n.Kind != yaml.MappingNode {
			bad("want a mapping, got " + describe(n))
			return
		}
		if t.Kind() == reflect.Slice && n.Kind != yaml.SequenceNode {
			bad("want a list, got " + describe(n))
			return
		}
		if t.Kind() == reflect.Map && t.Elem().Kind() == reflect.String {
			for i := 1; i < len(n.Content); i += 2 {
				if v := n.Content[i]; v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
					*errs = append(*errs, &FieldError{Line: v.Line, Field: path + "." + n.Content[i-1].Value, Msg: "want a string value, got " + describe(v)})
				}
			}
		}
		return
	}
	if isNull {
		bad("must not be null")
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			bad("want a mapping, got " + describe(n))
			return
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			sub := k.Value
			if path != "" {
				sub = path + "." + k.Value
			}
			f, ok := fields[k.Value]
			if !ok {
				msg := fmt.Sprintf("unknown key %q", k.Value)
				if s := suggest(k.Value, fields, path == ""); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
				*errs = append(*errs, &FieldError{Line: k.Line, Field: path, Msg: msg})
				continue
			}
			lines[sub] = k.Line
			check(v, f.Type, sub, lines, errs)
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			bad("want a string, got " + describe(n))
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			bad("want true or false, got " + describe(n))
		}
	case reflect.Int, reflect.Int64:
		switch {
		case n.Kind == yaml.ScalarNode && n.Tag == "!!int":
			if _, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64); err != nil {
				bad("integer out of range: " + n.Value)
			}
		case n.Kind == yaml.ScalarNode && n.Tag == "!!float":
			f, err := strconv.ParseFloat(n.Value, 64)
			if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
				bad("want an integer, got " + n.Value)
				return
			}
			n.Tag, n.Value = "!!int", strconv.FormatInt(int64(f), 10)
		default:
			bad("want an integer, got " + describe(n))
		}
	case reflect.Float64:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
			bad("want a number, got " + describe(n))
		}
	default:
		bad(fmt.Sprintf("unsupported setting type %s", t))
	}
}

// yamlFields maps a struct's yaml keys to its fields.
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	out := make(map[string]reflect.StructField, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		out[name] = f
	}
	return out
}

// describe names a node's kind for an error message.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		kind := map[string]string{"!!str": "string", "!!int": "integer", "!!float": "number", "!!bool": "boolean", "!!null": "null"}[n.Tag]
		if kind == "" {
			kind = n.Tag
		}
		v := n.Value
		if len(v) > 40 {
			v = v[:40] + "…"
		}
		return fmt.Sprintf("%s %q", kind, v)
	}
	return "an unsupported YAML node"
}

// suggest returns the known key closest to an unknown one, if it is close enough to be a
// typo (at most 3 edits, hyphens read as underscores). At the top level the aliases and the
// older options are candidates too.
func suggest(key string, fields map[string]reflect.StructField, topLevel bool) string {
	best, bestD := "", 4
	names := make([]string, 0, len(fields)+len(aliases)+len(legacyOptions))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	if topLevel {
		names = append(names, topLevelNames()...)
	}
	key = strings.ReplaceAll(key, "-", "_")
	for _, k := range names {
		if d := levenshtein(key, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// sortByLine orders problems by source line; those without a line keep their order, last.
func sortByLine(es Errors) {
	sort.SliceStable(es, func(i, j int) bool {
		li, lj := es[i].Line, es[j].Line
		if li == 0 || lj == 0 {
			return li != 0 && lj == 0
		}
		return li < lj
	})
}
