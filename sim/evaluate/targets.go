package evaluate

import (
	"fmt"
	"io"
	"strings"
)

// TargetOracleRatio is the most GPU-hours a policy may use against the hindsight oracle's
// (issue 12's target: at most 1.15× the oracle, no more than the best static deployment,
// the goodput the policies are held to, and more goodput than Dynamo's SLA planner at no
// more GPU-hours).
const TargetOracleRatio = 1.15

// TargetScore is how one run of one scenario (or robustness case) stands against the
// targets: the run and the rows it is measured against (nil: not run there). Run is never
// nil in a score ScenarioTargets or RobustTargets return; the methods read it.
type TargetScore struct {
	// Name is the scenario's (or the case's).
	Name string
	// SLOGoodput is the goodput the policy is held to (0.95 unless the scenario says).
	SLOGoodput float64
	// Run is the policy's row; Oracle, BestStatic and Against the hindsight oracle's, the best
	// static deployment's and the policy it must beat's (dynamo-sla).
	Run, Oracle, BestStatic, Against *Row
	// SLOOracle is the oracle's cheapest run found reaching SLOGoodput (the slo-oracle row;
	// nil when it did not run): whether a schedule the oracle finds meets the goodput target
	// within the GPU-hour targets at all.
	SLOOracle *Row
}

// GoodputMet reports whether the run reaches the goodput it is held to.
func (s TargetScore) GoodputMet() bool { return s.Run.Goodput >= s.SLOGoodput }

// OracleRatio is the run's GPU-hours over the oracle's (false: no oracle, or one that used
// none).
func (s TargetScore) OracleRatio() (float64, bool) { return gpuRatio(s.Run, s.Oracle) }

// OracleMet reports whether the run uses at most TargetOracleRatio of the oracle's
// GPU-hours (false when no oracle ran).
func (s TargetScore) OracleMet() bool {
	_, ok := s.OracleRatio()
	return ok && s.Run.GPUHours <= TargetOracleRatio*s.Oracle.GPUHours
}

// StaticRatio is the run's GPU-hours over the best static deployment's (false: none ran).
func (s TargetScore) StaticRatio() (float64, bool) { return gpuRatio(s.Run, s.BestStatic) }

// gpuRatio is run's GPU-hours over base's (false: no base, or one that used none).
func gpuRatio(run, base *Row) (float64, bool) {
	if base == nil || !(base.GPUHours > 0) {
		return 0, false
	}
	return run.GPUHours / base.GPUHours, true
}

// StaticMet reports whether the run uses no more GPU-hours than the best static deployment
// (false when none ran).
func (s TargetScore) StaticMet() bool {
	r, ok := s.StaticRatio()
	return ok && r <= 1
}

// AgainstMet reports whether the run gets more goodput than the policy it must beat at no
// more GPU-hours (false when that policy did not run).
func (s TargetScore) AgainstMet() bool {
	return s.Against != nil && s.Run.Goodput > s.Against.Goodput && s.Run.GPUHours <= s.Against.GPUHours
}

// scoreRows finds policy's row and the rows it is measured against among rows (false when
// the policy did not run).
func scoreRows(name string, sloGoodput float64, rows []Row, policy, against string) (TargetScore, bool) {
	s := TargetScore{Name: name, SLOGoodput: sloGoodput}
	for i := range rows {
		r := &rows[i]
		switch {
		case r.Kind == KindPolicy && r.Name == policy:
			s.Run = r
		case r.Kind == KindPolicy && r.Name == against:
			s.Against = r
		case r.Kind == KindOracle:
			s.Oracle = r
		case r.Kind == KindStatic && r.Name == "best-static":
			s.BestStatic = r
		case r.Kind == KindSLOOracle:
			s.SLOOracle = r
		}
	}
	return s, s.Run != nil
}

// ScenarioTargets scores policy on each scenario report against the targets, measured
// against the policy named against; the reports where policy did not run are returned apart
// (by scenario name).
func ScenarioTargets(reports []*Report, policy, against string) (scores []TargetScore, notRun []string) {
	for _, rep := range reports {
		slo := rep.SLOGoodput
		if !(slo > 0) {
			slo = DefaultSLOGoodput
		}
		if s, ok := scoreRows(rep.Scenario, slo, rep.Rows, policy, against); ok {
			scores = append(scores, s)
		} else {
			notRun = append(notRun, rep.Scenario)
		}
	}
	return scores, notRun
}

// RobustTargets scores policy on each case of a robustness report, as ScenarioTargets
// does a scenario (the cases are held to DefaultSLOGoodput); notRun counts the cases without
// the policy's row.
func RobustTargets(rep *RobustReport, policy, against string) (scores []TargetScore, notRun int) {
	for _, c := range rep.Cases {
		if s, ok := scoreRows(c.Name, DefaultSLOGoodput, c.Rows, policy, against); ok {
			scores = append(scores, s)
		} else {
			notRun++
		}
	}
	return scores, notRun
}

// WriteScenarioTargets writes a Markdown table of each scenario against the targets, with
// how far a run is from each target it misses. The ratios are of the unrounded GPU-hours.
func WriteScenarioTargets(w io.Writer, scores []TargetScore, policy, against string) error {
	fmt.Fprintf(w, "| scenario | %s | goodput target | ≤ %.2f× the oracle's GPU-h | ≤ the best static's GPU-h | more goodput than %s at no more GPU-h | the oracle's cheapest schedule at the goodput target |\n|---|---|---|---|---|---|---|\n",
		policy, TargetOracleRatio, against)
	for _, s := range scores {
		cells := []string{s.Name, fmt.Sprintf("%.1f%% at %.2f GPU-h", 100*s.Run.Goodput, s.Run.GPUHours), goodputCell(s), oracleCell(s), staticCell(s), againstCell(s, against), sloOracleCell(s, against)}
		for i, c := range cells {
			cells[i] = strings.ReplaceAll(c, "|", "\\|")
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	if len(scores) > 1 {
		writeScenarioSummary(w, scores, policy, against)
	}
	_, err := fmt.Fprintln(w)
	return err
}

// writeScenarioSummary writes the line under a table of several scenarios: the policy's
// goodput range and how many scenarios meet each target, of those where the baseline the
// target needs ran (the runs without one are named); all four counts over every scenario,
// and without any oracle the other three do.
func writeScenarioSummary(w io.Writer, scores []TargetScore, policy, against string) {
	c := countTargets(scores)
	lo, hi := scores[0].Run.Goodput, scores[0].Run.Goodput
	for _, s := range scores[1:] {
		lo, hi = min(lo, s.Run.Goodput), max(hi, s.Run.Goodput)
	}
	oracleCell := fmt.Sprintf("at most %.2f× the oracle's GPU-hours on %s", TargetOracleRatio, ranOn(c.oracle, c.oracles, c.n, "an oracle"))
	staticCell := "at most the best static's on " + ranOn(c.static, c.statics, c.n, "a static search")
	againstCell := fmt.Sprintf("more goodput than %s at no more GPU-hours on %s", against, ranOn(c.beat, c.againsts, c.n, against))
	all := "all four on " + countOf(c.all, c.n)
	if c.oracles == 0 {
		oracleCell = "no oracle ran"
		all = "the other three on " + countOf(c.three, c.n)
	}
	fmt.Fprintf(w, "\nOf these %d, %s gets %.1f–%.1f%% and meets the goodput target on %s; %s; %s; %s; %s.\n",
		c.n, policy, 100*lo, 100*hi, countOf(c.goodput, c.n), oracleCell, staticCell, againstCell, all)
}

// ranOn is "k of ran", naming the n − ran runs without what the count needs (without), or
// "none (no run with without)" when no run had it.
func ranOn(k, ran, n int, without string) string {
	switch {
	case ran == 0:
		return "none (no run with " + without + ")"
	case ran < n:
		return fmt.Sprintf("%s (%d without %s)", countOf(k, ran), n-ran, without)
	}
	return countOf(k, ran)
}

// WriteRobustTargets writes one Markdown table row per robustness report (name: what it
// is): how many of its cases meet each target, and how many more had no row of the policy
// (notRun). The header is written first when header is set.
func WriteRobustTargets(w io.Writer, name string, scores []TargetScore, notRun int, header bool, against string) error {
	if header {
		fmt.Fprintf(w, "| benchmark | cases | goodput target | ≤ %.2f× the oracle's GPU-h | ≤ the best static's GPU-h | more goodput than %s at no more GPU-h | all four |\n|---|---|---|---|---|---|---|\n",
			TargetOracleRatio, against)
	}
	c := countTargets(scores)
	allCell := countOf(c.all, c.n)
	if c.oracles == 0 {
		allCell = "no oracle; the other three: " + countOf(c.three, c.n)
	}
	cases := fmt.Sprint(c.n)
	if notRun > 0 {
		cases += fmt.Sprintf(" (%d more without the policy's row)", notRun)
	}
	_, err := fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", strings.ReplaceAll(name, "|", "\\|"), cases, countOf(c.goodput, c.n),
		countOf(c.oracle, c.oracles), countOf(c.static, c.statics), countOf(c.beat, c.againsts), allCell)
	return err
}

// targetCounts counts the runs meeting each target; oracles, statics and againsts count
// those where the baseline the target needs ran.
type targetCounts struct {
	// n counts the runs; goodput, oracle, static and beat those meeting each target.
	n, goodput, oracle, oracles, static, statics, beat, againsts int
	// all counts the runs meeting the four targets; three the three without the oracle's.
	all, three int
}

// countTargets counts, over scores, the runs meeting each target.
func countTargets(scores []TargetScore) targetCounts {
	c := targetCounts{n: len(scores)}
	for _, s := range scores {
		_, hasOracle := s.OracleRatio()
		_, hasStatic := s.StaticRatio()
		c.goodput += b2i(s.GoodputMet())
		c.oracle += b2i(s.OracleMet())
		c.oracles += b2i(hasOracle)
		c.static += b2i(s.StaticMet())
		c.statics += b2i(hasStatic)
		c.beat += b2i(s.AgainstMet())
		c.againsts += b2i(s.Against != nil)
		c.all += b2i(s.GoodputMet() && s.OracleMet() && s.StaticMet() && s.AgainstMet())
		c.three += b2i(s.GoodputMet() && s.StaticMet() && s.AgainstMet())
	}
	return c
}

// countOf is "k of n", or "not run" when n is 0.
func countOf(k, n int) string {
	if n == 0 {
		return "not run"
	}
	return fmt.Sprintf("%d of %d", k, n)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func goodputCell(s TargetScore) string {
	target := strings.TrimSuffix(fmt.Sprintf("%.1f", 100*s.SLOGoodput), ".0")
	if s.GoodputMet() {
		return fmt.Sprintf("met (≥ %s%%)", target)
	}
	// A shortfall that one decimal rounds to 0.0 is still one (the goodput column rounds 94.96%
	// to 95.0%): two decimals, or a bound under them.
	short := 100 * (s.SLOGoodput - s.Run.Goodput)
	switch {
	case short < 0.005:
		return fmt.Sprintf("under 0.01 points short of %s%%", target)
	case short < 0.05:
		return fmt.Sprintf("%.2f points short of %s%%", short, target)
	}
	return fmt.Sprintf("%.1f points short of %s%%", short, target)
}

func oracleCell(s TargetScore) string {
	r, ok := s.OracleRatio()
	if !ok {
		return "no oracle"
	}
	cell := fmt.Sprintf("%.2f× (oracle %.1f%% at %.2f)", r, 100*s.Oracle.Goodput, s.Oracle.GPUHours)
	if s.OracleMet() {
		return "met: " + cell
	}
	return fmt.Sprintf("%s: %.2f GPU-h over", cell, s.Run.GPUHours-TargetOracleRatio*s.Oracle.GPUHours)
}

func staticCell(s TargetScore) string {
	r, ok := s.StaticRatio()
	if !ok {
		return "no static"
	}
	cell := fmt.Sprintf("%s %.1f%% at %.2f", s.BestStatic.Deployment, 100*s.BestStatic.Goodput, s.BestStatic.GPUHours)
	if s.BestStatic.OverBudget {
		cell += " (over the budget: none within it met the target)"
	}
	if r <= 1 {
		return "met: " + underOver(r) + " " + cell
	}
	return underOver(r) + " " + cell
}

// underOver says how far a ratio of GPU-hours r is under or over 1: "x.y% under" or
// "x.y% over".
func underOver(r float64) string {
	if r <= 1 {
		return fmt.Sprintf("%.1f%% under", 100*(1-r))
	}
	return fmt.Sprintf("%.1f%% over", 100*(r-1))
}

func againstCell(s TargetScore, against string) string {
	if s.Against == nil {
		return against + " not run"
	}
	cell := fmt.Sprintf("%.1f%% at %.2f", 100*s.Against.Goodput, s.Against.GPUHours)
	if s.AgainstMet() {
		return "met: " + cell
	}
	var why []string
	if s.Run.Goodput <= s.Against.Goodput {
		why = append(why, "no more goodput")
	}
	if s.Run.GPUHours > s.Against.GPUHours {
		if s.Against.GPUHours > 0 {
			why = append(why, fmt.Sprintf("%.0f%% more GPU-h", 100*(s.Run.GPUHours/s.Against.GPUHours-1)))
		} else {
			why = append(why, "more GPU-h")
		}
	}
	return cell + ": " + strings.Join(why, ", ")
}

// sloOracleCell says what the oracle's cheapest schedule reaching the goodput target costs
// against the GPU-hour targets: the best static's, TargetOracleRatio times the oracle's and
// against's GPU-hours (with more goodput than against). Where it misses one, no schedule the
// oracle's search found meets the goodput target and that one together.
func sloOracleCell(s TargetScore, against string) string {
	o := s.SLOOracle
	if o == nil {
		return "not run"
	}
	cell := fmt.Sprintf("%.1f%% at %.2f", 100*o.Goodput, o.GPUHours)
	if o.Goodput < s.SLOGoodput {
		return cell + ": none found reaching the goodput target"
	}
	var parts []string
	if r, ok := gpuRatio(o, s.BestStatic); ok {
		parts = append(parts, underOver(r)+" the best static's")
	}
	if r, ok := gpuRatio(o, s.Oracle); ok {
		part := fmt.Sprintf("%.2f× the oracle's", r)
		if r > TargetOracleRatio {
			part += fmt.Sprintf(" (over %.2f×)", TargetOracleRatio)
		}
		parts = append(parts, part)
	}
	if a := s.Against; a != nil {
		switch r, ok := gpuRatio(o, a); {
		case !ok:
			parts = append(parts, fmt.Sprintf("more GPU-h than %s (none)", against))
		case r <= 1:
			parts = append(parts, fmt.Sprintf("within %s's GPU-h", against))
		default:
			parts = append(parts, fmt.Sprintf("%.0f%% over %s's", 100*(r-1), against))
		}
		if o.Goodput <= a.Goodput {
			parts = append(parts, "no more goodput than "+against)
		}
	}
	if len(parts) == 0 {
		return cell
	}
	return cell + ": " + strings.Join(parts, ", ")
}
