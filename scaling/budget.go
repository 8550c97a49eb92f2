package scaling

import "math"

// This file holds Dynamo's GPU budget primitives (core/budget.py, reference §3.6) with
// Python's integer semantics: // floors toward minus infinity, math.floor and math.ceil act
// on float quotients. A negative minimum or maximum disables that bound; the maximum is a
// hard ceiling and is never relaxed, the minimum is relaxed by a tolerance equal to the
// largest per-replica GPU cost so integer steps can land in the band.

// floorDiv is Python's a // b for b > 0.
func floorDiv(a, b int) int {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// ceilDiv is Python's -((-a) // b).
func ceilDiv(a, b int) int { return -floorDiv(-a, b) }

// maxReplicas bounds replica counts computed from floats. Python's math.ceil returns an
// exact integer however large; a Go conversion of a float beyond the int range wraps to a
// negative number, which could turn a huge scale-up into a scale-down. Saturating far above
// any real deployment keeps the direction; the throughput delta cap and the GPU budget then
// bound the step as they would in Python.
const maxReplicas = 1 << 30

// pyFloor and pyCeil are math.floor and math.ceil on a float, as ints saturated at
// ±maxReplicas (NaN gives 0).
func pyFloor(x float64) int { return saturate(math.Floor(x)) }
func pyCeil(x float64) int  { return saturate(math.Ceil(x)) }

func saturate(x float64) int {
	switch {
	case math.IsNaN(x):
		return 0
	case x >= maxReplicas:
		return maxReplicas
	case x <= -maxReplicas:
		return -maxReplicas
	}
	return int(x)
}

// ComputeTolerance is the largest positive per-replica GPU cost (0 if none).
func ComputeTolerance(costs ...int) int {
	t := 0
	for _, c := range costs {
		if c > 0 && c > t {
			t = c
		}
	}
	return t
}

// BoundsForTotal reports whether total GPUs fit [minGPUs - tolerance, maxGPUs], and why not.
func BoundsForTotal(total, minGPUs, maxGPUs, tolerance int) (bool, string) {
	if maxGPUs >= 0 && total > maxGPUs {
		return false, "exceeds ceiling"
	}
	if minGPUs >= 0 && total < minGPUs-tolerance {
		return false, "below floor"
	}
	return true, ""
}

// ProportionalClampPair clamps (p, d) so the total lands in the budget band, shrinking or
// growing both pools proportionally (Dynamo's proportional_clamp_pair). It returns (0, 0)
// when even the minimum endpoints do not fit under the ceiling, and the inputs when a floor
// push would overshoot the ceiling. On the ceiling path the decode count is never raised
// above its input (the newest tests' behaviour).
func ProportionalClampPair(p, d, pGPU, dGPU, minGPUs, maxGPUs, pMin, dMin int) (int, int) {
	if minGPUs < 0 && maxGPUs < 0 {
		return p, d
	}
	if pGPU <= 0 || dGPU <= 0 {
		return p, d
	}
	total := p*pGPU + d*dGPU
	tol := 0
	if minGPUs >= 0 && maxGPUs >= 0 {
		tol = ComputeTolerance(pGPU, dGPU)
	}
	if in, _ := BoundsForTotal(total, minGPUs, maxGPUs, tol); in {
		return p, d
	}
	if maxGPUs >= 0 && total > maxGPUs {
		if maxGPUs < pMin*pGPU+dMin*dGPU {
			return 0, 0
		}
		scale := float64(maxGPUs) / float64(total)
		maxP := pyFloor(float64(maxGPUs-dMin*dGPU) / float64(pGPU))
		newP := max(pMin, min(maxP, pyFloor(float64(p)*scale)))
		newD := max(dMin, min(d, pyFloor(float64(maxGPUs-newP*pGPU)/float64(dGPU))))
		return newP, newD
	}
	floor := minGPUs
	var newP, newD int
	if total <= 0 {
		newP = max(pMin, pyCeil(float64(floor)/2/float64(pGPU)))
	} else {
		newP = max(pMin, pyCeil(float64(p)*(float64(floor)/float64(total))))
	}
	newD = max(dMin, pyCeil(float64(max(0, floor-newP*pGPU))/float64(dGPU)))
	if maxGPUs >= 0 && newP*pGPU+newD*dGPU > maxGPUs {
		return p, d // the floor push is infeasible under the ceiling
	}
	return newP, newD
}

// ProportionalClampSingle is the single-pool budget clamp (Dynamo's
// proportional_clamp_single). It returns 0 when minEndpoint replicas cannot fit under the
// ceiling, and never pushes above the ceiling to reach the floor.
func ProportionalClampSingle(desired, gpu, minGPUs, maxGPUs, minEndpoint int) int {
	if minGPUs < 0 && maxGPUs < 0 {
		return desired
	}
	if gpu <= 0 {
		return desired
	}
	total := desired * gpu
	tol := 0
	if minGPUs >= 0 && maxGPUs >= 0 {
		tol = gpu
	}
	if in, _ := BoundsForTotal(total, minGPUs, maxGPUs, tol); in {
		return desired
	}
	if maxGPUs >= 0 && total > maxGPUs {
		if maxGPUs < minEndpoint*gpu {
			return 0
		}
		return max(minEndpoint, pyFloor(float64(maxGPUs)/float64(gpu)))
	}
	n := max(minEndpoint, pyCeil(float64(minGPUs)/float64(gpu)))
	if maxGPUs >= 0 && n*gpu > maxGPUs {
		if maxGPUs < minEndpoint*gpu {
			return 0
		}
		return max(minEndpoint, pyFloor(float64(maxGPUs)/float64(gpu)))
	}
	return n
}

// FitDirectionalBudgetPair fits a proposal into the GPU band without changing its
// directions: every returned component lies between its current and proposed counts, and
// in an opposing rebalance (one up, one down) both legs move or neither does (Dynamo's
// fit_directional_budget_pair). Among candidates it prefers the one closest to the
// proposal, then the most proportional progress, then the most progress, then the smaller
// counts.
func FitDirectionalBudgetPair(curP, curD, propP, propD, pGPU, dGPU, minGPUs, maxGPUs, pMin, dMin int) (int, int) {
	if pGPU <= 0 || dGPU <= 0 {
		return propP, propD
	}
	tol := 0
	if minGPUs >= 0 && maxGPUs >= 0 {
		tol = ComputeTolerance(pGPU, dGPU)
	}
	pDown, pUp := propP < curP, propP > curP
	dDown, dUp := propD < curD, propD > curD
	opposing := (pDown && dUp) || (pUp && dDown)
	reqP, reqD := absInt(propP-curP), absInt(propD-curD)

	pLow, pHigh := max(min(curP, propP), pMin), max(curP, propP)
	dLow, dHigh := max(min(curD, propD), dMin), max(curD, propD)
	if maxGPUs >= 0 {
		pHigh = min(pHigh, floorDiv(maxGPUs-dLow*dGPU, pGPU))
		dHigh = min(dHigh, floorDiv(maxGPUs-pLow*pGPU, dGPU))
	}
	if minGPUs >= 0 {
		lower := minGPUs - tol
		pLow = max(pLow, ceilDiv(lower-dHigh*dGPU, pGPU))
		dLow = max(dLow, ceilDiv(lower-pHigh*pGPU, dGPU))
	}
	if pLow > pHigh || dLow > dHigh {
		return curP, curD
	}
	if in, _ := BoundsForTotal(propP*pGPU+propD*dGPU, minGPUs, maxGPUs, tol); in && propP >= pMin && propD >= dMin {
		return propP, propD
	}

	type score [5]int
	var best *score
	bestP, bestD := curP, curD
	consider := func(cp, cd int) {
		if in, _ := BoundsForTotal(cp*pGPU+cd*dGPU, minGPUs, maxGPUs, tol); !in {
			return
		}
		progP, progD := absInt(cp-curP), absInt(cd-curD)
		s := score{absInt(propP-cp) + absInt(propD-cd), absInt(progP*reqD - progD*reqP), -(progP + progD), cp, cd}
		if best == nil || less(s, *best) {
			best, bestP, bestD = &s, cp, cd
		}
	}
	hasMin := minGPUs >= 0
	effMin := minGPUs - tol
	if pHigh-pLow <= dHigh-dLow {
		for cp := pLow; cp <= pHigh; cp++ {
			lo, hi := dLow, dHigh
			if hasMin {
				lo = max(lo, ceilDiv(effMin-cp*pGPU, dGPU))
			}
			if maxGPUs >= 0 {
				hi = min(hi, floorDiv(maxGPUs-cp*pGPU, dGPU))
			}
			if opposing {
				if cp == curP {
					if lo <= curD && curD <= hi {
						consider(cp, curD)
					}
					continue
				}
				if propD > curD {
					lo = max(lo, curD+1)
				} else {
					hi = min(hi, curD-1)
				}
			}
			if lo <= hi {
				consider(cp, min(max(propD, lo), hi))
			}
		}
	} else {
		for cd := dLow; cd <= dHigh; cd++ {
			lo, hi := pLow, pHigh
			if hasMin {
				lo = max(lo, ceilDiv(effMin-cd*dGPU, pGPU))
			}
			if maxGPUs >= 0 {
				hi = min(hi, floorDiv(maxGPUs-cd*dGPU, pGPU))
			}
			if opposing {
				if cd == curD {
					if lo <= curP && curP <= hi {
						consider(curP, cd)
					}
					continue
				}
				if propP > curP {
					lo = max(lo, curP+1)
				} else {
					hi = min(hi, curP-1)
				}
			}
			if lo <= hi {
				consider(min(max(propP, lo), hi), cd)
			}
		}
	}
	return bestP, bestD
}

func less(a, b [5]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

func absInt(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// GuardSingleScalingBudget applies the GPU band to one component's proposal without
// reversing its direction (Dynamo's guard_single_scaling_budget). An out-of-band current
// allocation is reconciled from the current count (ReasonGPUBudgetReconcile); a proposal
// that would cross the floor or the ceiling, or that the clamp would reverse, is held
// (ReasonGPUBudgetGuardHold).
func GuardSingleScalingBudget(current, proposed, gpu, minGPUs, maxGPUs, minEndpoint int) (int, Reason) {
	if gpu <= 0 {
		return proposed, ""
	}
	tol := 0
	if minGPUs >= 0 && maxGPUs >= 0 {
		tol = gpu
	}
	curTotal := current * gpu
	if in, _ := BoundsForTotal(curTotal, minGPUs, maxGPUs, tol); !in {
		return ProportionalClampSingle(current, gpu, minGPUs, maxGPUs, minEndpoint), ReasonGPUBudgetReconcile
	}
	if minGPUs >= 0 && curTotal <= minGPUs && proposed < current {
		return current, ReasonGPUBudgetGuardHold
	}
	if maxGPUs >= 0 && curTotal >= maxGPUs && proposed > current {
		return current, ReasonGPUBudgetGuardHold
	}
	final := ProportionalClampSingle(proposed, gpu, minGPUs, maxGPUs, minEndpoint)
	if final < min(current, proposed) || final > max(current, proposed) {
		return current, ReasonGPUBudgetGuardHold
	}
	return final, ""
}

// GuardDisaggScalingBudget applies the GPU band to a disaggregated proposal safely (Dynamo's
// guard_disagg_scaling_budget): out-of-band current allocations are reconciled from the
// current counts; at the floor only opposing rebalances move (atomically); at the ceiling a
// scale-up is admitted only as an opposing rebalance; otherwise the proportional clamp may
// suppress but never reverse or amplify a movement.
func GuardDisaggScalingBudget(curP, curD, propP, propD, pGPU, dGPU, minGPUs, maxGPUs, pMin, dMin int) (int, int, Reason) {
	if pGPU <= 0 || dGPU <= 0 {
		p, d := ProportionalClampPair(propP, propD, pGPU, dGPU, minGPUs, maxGPUs, pMin, dMin)
		return p, d, ""
	}
	tol := 0
	if maxGPUs >= 0 {
		tol = ComputeTolerance(pGPU, dGPU)
	}
	curTotal := curP*pGPU + curD*dGPU
	if in, _ := BoundsForTotal(curTotal, minGPUs, maxGPUs, tol); !in {
		p, d := ProportionalClampPair(curP, curD, pGPU, dGPU, minGPUs, maxGPUs, pMin, dMin)
		return p, d, ReasonGPUBudgetReconcile
	}
	pDown, pUp := propP < curP, propP > curP
	dDown, dUp := propD < curD, propD > curD
	anyDown, anyUp := pDown || dDown, pUp || dUp
	opposing := (pDown && dUp) || (pUp && dDown)

	if curTotal <= minGPUs && anyDown && !anyUp {
		return curP, curD, ReasonGPUBudgetGuardHold
	}
	fit := func() (int, int, Reason) {
		p, d := FitDirectionalBudgetPair(curP, curD, propP, propD, pGPU, dGPU, minGPUs, maxGPUs, pMin, dMin)
		if p == curP && d == curD {
			return curP, curD, ReasonGPUBudgetGuardHold
		}
		return p, d, ""
	}
	if curTotal <= minGPUs && opposing {
		return fit()
	}
	if maxGPUs >= 0 && curTotal >= maxGPUs && anyUp {
		if !opposing {
			return curP, curD, ReasonGPUBudgetGuardHold
		}
		return fit()
	}
	p, d := ProportionalClampPair(propP, propD, pGPU, dGPU, minGPUs, maxGPUs, pMin, dMin)
	within := func(cur, prop, final int) bool { return min(cur, prop) <= final && final <= max(cur, prop) }
	if !within(curP, propP, p) || !within(curD, propD, d) {
		return curP, curD, ReasonGPUBudgetGuardHold
	}
	if in, _ := BoundsForTotal(p*pGPU+d*dGPU, minGPUs, maxGPUs, tol); !in {
		return curP, curD, ReasonGPUBudgetGuardHold
	}
	return p, d, ""
}
