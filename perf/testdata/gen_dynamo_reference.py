#!/usr/bin/env python3
"""Writes dynamo_reference_h200.json: what Dynamo's interpolators answer on the H200 profile.

Dynamo's G1 interpolators (reference §3.3) build the prefill curves with
scipy.interpolate.interp1d(kind="cubic") and the decode grids with
scipy.interpolate.griddata(method="cubic") on a 100x100 grid, NaN cells filled with
griddata(method="nearest"). This script evaluates those same scipy calls (Debian's
python3-scipy 1.10.1 here) so the Go tests can measure the Go interpolators against them.
It is not run by CI: the JSON it writes is committed.

    /usr/bin/python3 perf/testdata/gen_dynamo_reference.py
"""
import json
import os

import numpy as np
from scipy.interpolate import griddata, interp1d

here = os.path.dirname(os.path.abspath(__file__))
prof = os.path.join(here, "profiles", "h200-llama3.1-8b-fp8-tp1")
p = np.load(os.path.join(prof, "prefill_raw_data.npz"))
d = np.load(os.path.join(prof, "decode_raw_data.npz"))

ttft = interp1d(p["prefill_isl"], p["prefill_ttft"], kind="cubic")
thpt = interp1d(p["prefill_isl"], p["prefill_thpt_per_gpu"], kind="cubic")
isl_lo, isl_hi = float(min(p["prefill_isl"])), float(max(p["prefill_isl"]))
prefill = []
for isl in range(100, 16373, 250):
    q = min(max(float(isl), isl_lo), isl_hi)
    prefill.append({"isl": isl, "ttft_ms": float(ttft(q)), "thpt_per_gpu": float(thpt(q))})

x, y = d["x_kv_usage"], d["y_context_length"]
xi = np.linspace(0, 1, 100)
yi = np.linspace(0, max(y), 100)
X, Y = np.meshgrid(xi, yi)


def grid(values):
    g = griddata((x, y), values, (X, Y), method="cubic")
    n = griddata((x, y), values, (X, Y), method="nearest")
    return np.where(np.isnan(g), n, g)


itl_grid, thpt_grid = grid(d["z_itl"]), grid(d["z_thpt_per_gpu"])


def best(itl, ctx):
    iy = int(np.clip(np.round((ctx - yi[0]) / (yi[1] - yi[0])), 0, 99))
    for ix in range(99, -1, -1):
        if itl_grid[iy, ix] <= itl:
            return float(thpt_grid[iy, ix]), float(itl_grid[iy, ix]), float(xi[ix])
    return float(thpt_grid[iy, 0]), float(itl_grid[iy, 0]), float(xi[0])


find_best = []
for itl in (5, 7.5, 10, 15, 20, 30, 40, 50):
    for ctx in range(100, 13586, 500):
        t, i, kv = best(itl, ctx)
        find_best.append({"itl_target_ms": itl, "context": ctx, "thpt_per_gpu": t, "itl_ms": i, "kv_usage": kv})

out = {
    "generator": "perf/testdata/gen_dynamo_reference.py with scipy interp1d(cubic) and griddata(cubic, nearest fill)",
    "prefill": prefill,
    "find_best_throughput_per_gpu": find_best,
}
with open(os.path.join(here, "dynamo_reference_h200.json"), "w") as f:
    json.dump(out, f, indent=1)
