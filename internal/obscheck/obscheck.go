// Package obscheck reads the observability artefacts under deploy/ for tests: the PromQL
// expressions of the Grafana dashboard (deploy/grafana) and of the alert rules
// (deploy/prometheus), with Grafana's variables given test values, and the metric names an
// expression selects (parsed with Prometheus' own PromQL parser).
package obscheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// Query is one PromQL expression and where it comes from.
type Query struct {
	// Where names the panel and target, or the alert.
	Where string
	// Expr is the expression with Grafana's variables substituted (Substitute).
	Expr string
}

// Dashboard is the part of a Grafana dashboard the checks read.
type Dashboard struct {
	Title  string `json:"title"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

// DashboardQueries returns every panel target's expression of the dashboard at path, and
// the metric of each label_values() variable as a query of its own; an error when the file
// is not a dashboard or a target has no expression.
func DashboardQueries(path string) ([]Query, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(d.Panels) == 0 {
		return nil, fmt.Errorf("%s: no panels", path)
	}
	var qs []Query
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			return nil, fmt.Errorf("%s: panel %q has no targets", path, p.Title)
		}
		for _, t := range p.Targets {
			if strings.TrimSpace(t.Expr) == "" {
				return nil, fmt.Errorf("%s: panel %q target %s has no expression", path, p.Title, t.RefID)
			}
			qs = append(qs, Query{Where: fmt.Sprintf("panel %q target %s", p.Title, t.RefID), Expr: Substitute(t.Expr)})
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*\w+\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(strings.TrimSpace(v.Definition))
		if m == nil {
			return nil, fmt.Errorf("%s: variable %q: want label_values(<selector>, <label>), got %q", path, v.Name, v.Definition)
		}
		qs = append(qs, Query{Where: fmt.Sprintf("variable %q", v.Name), Expr: Substitute(m[1])})
	}
	return qs, nil
}

// RuleFile is a Prometheus rule file (rule_files; a PrometheusRule's spec).
type RuleFile struct {
	Groups []RuleGroup `yaml:"groups"`
}

// RuleGroup is one group of rules.
type RuleGroup struct {
	Name  string           `yaml:"name"`
	Rules []map[string]any `yaml:"rules"`
}

// RuleQueries returns the expression of every rule of the rule file at path.
func RuleQueries(path string) ([]Query, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f RuleFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var qs []Query
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			name, _ := r["alert"].(string)
			if name == "" {
				name, _ = r["record"].(string)
			}
			expr, _ := r["expr"].(string)
			if name == "" || strings.TrimSpace(expr) == "" {
				return nil, fmt.Errorf("%s: group %q: a rule without a name or an expression: %v", path, g.Name, r)
			}
			qs = append(qs, Query{Where: fmt.Sprintf("rule %q", name), Expr: expr})
		}
	}
	if len(qs) == 0 {
		return nil, fmt.Errorf("%s: no rules", path)
	}
	return qs, nil
}

// Substitute gives Grafana's variables test values: every deployment, a 5-minute range,
// a 1-minute rate interval.
func Substitute(expr string) string {
	return strings.NewReplacer(`$deployment`, `.*`, `${deployment}`, `.*`, `$__range`, `5m`,
		`$__rate_interval`, `1m`, `$__interval`, `15s`).Replace(expr)
}

// MetricNames parses expr and returns the metric names it selects, sorted and unique; an
// error when it does not parse or a selector names no metric.
func MetricNames(expr string) ([]string, error) {
	e, err := parser.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	var bad error
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			if vs.Name == "" {
				bad = fmt.Errorf("selector %s names no metric", vs)
			}
			names = append(names, vs.Name)
		}
		return nil
	})
	if bad != nil {
		return nil, bad
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}
