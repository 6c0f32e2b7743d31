"""Realism report: the real TPU protos beside the simulator, statistic by
statistic.

Usage:
  python -m benchmarks.bench_realism [--real ../shared/data/real_tpu]
      [--seed 0] [--report benchmarks/results/realism.md]

Featurizes the real protos (`tpurank featurize`), simulates the small
collections they compare with (`tpurank synth --scale small`: tile:xla,
layout:xla:random, layout:nlp:random), and tabulates every statistic
`simulator.realism` reads from both, saying per row whether the simulator
is inside the real range. A last section lists the node and config feature
columns whose real values the simulated files never show (what a model
trained on simulated data has never seen). Ten kernels and one program are
all the real data there is: the ranges are narrow evidence, and the report
says so. The simulated runtimes are SIMULATED.
"""

import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from benchmarks import report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REAL = {"tile": "tile_tuning_data.pb", "layout": "layout_module_tuning_data.pb"}
SIMULATED = {"tile": ["tile:xla"],
             "layout": ["layout:xla:random", "layout:nlp:random"]}


def _cli(*args):
  subprocess.run([sys.executable, "-m", "tpurank.cli", *args], cwd=ROOT,
                 check=True, capture_output=True, text=True)


def _files(root: str, collection: str) -> list[str]:
  from schemas import npz_format  # pylint: disable=g-import-not-at-top
  return sorted(f for split in ("train", "valid", "test") for f in glob.glob(
      os.path.join(npz_format.collection_dir(root, collection, split),
                   "*.npz")))


def _fmt(v: float) -> str:
  return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"


def _table(comparisons, one_real: bool) -> list[str]:
  real_head = "real" if one_real else "real min..max (mean)"
  rows = [f"| statistic | {real_head} | simulated 5%..95% (median, mean) | "
          "simulated graphs in real range | inside |",
          "|---|---|---|---|---|"]
  for c in comparisons:
    real = (_fmt(c.real[0]) if one_real else
            f"{_fmt(c.real.min())}..{_fmt(c.real.max())} "
            f"({_fmt(c.real.mean())})")
    lo, hi = np.quantile(c.sim, [0.05, 0.95])
    share = "" if one_real else f"{c.share_inside():.0%}"
    rows.append(f"| {c.name} | {real} | {_fmt(lo)}..{_fmt(hi)} "
                f"({_fmt(np.median(c.sim))}, {_fmt(c.sim.mean())}) | "
                f"{share} | {'yes' if c.inside else '**no**'} |")
  return rows


def _unseen_columns(real_paths, sim_paths, key: str) -> list[tuple]:
  """Columns of `key` where real values leave the simulated min..max."""
  from schemas import npz_io  # pylint: disable=g-import-not-at-top

  def stack(paths):
    parts = []
    for p in paths:
      with npz_io.NpzReader(p) as r:
        a = r.read(key)
      parts.append(a.reshape(-1, a.shape[-1]))
    return np.concatenate(parts).astype(np.float64)
  real, sim = stack(real_paths), stack(sim_paths)
  out = []
  for j in range(real.shape[1]):
    lo, hi = sim[:, j].min(), sim[:, j].max()
    outside = np.mean((real[:, j] < lo) | (real[:, j] > hi))
    if outside > 0:
      out.append((j, outside, real[:, j].min(), real[:, j].max(), lo, hi))
  return out


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--real", default=os.path.join(
      ROOT, "..", "shared", "data", "real_tpu"))
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--report", default="benchmarks/results/realism.md")
  args = parser.parse_args()
  # pylint: disable=g-import-not-at-top
  from simulator import realism
  lines = ["# Realism: real TPU protos beside the simulator", "",
           f"Command: `python -m benchmarks.bench_realism --seed "
           f"{args.seed}`  ", f"Date: {time.strftime('%Y-%m-%d %H:%M')}. "
           "Real: the protos in ../shared/data/real_tpu (10 kernels with "
           "tile runs, 1 program with 112 layout runs), featurized by "
           "`tpurank featurize`. Simulated: `tpurank synth --scale small "
           f"--seed {args.seed}` (SIMULATED runtimes). The compiler default "
           "is config 0 on both sides. *Inside*: with several real graphs, "
           "the simulated median and mean both lie in the real min..max; "
           "with the one real program, its value lies in the simulated "
           "5%..95% range. Ten kernels and one program are narrow evidence: "
           "a row inside says the simulator is not contradicted, not that "
           "it is right.", ""]
  data = {}
  with tempfile.TemporaryDirectory() as tmp:
    for kind in ("tile", "layout"):
      out = os.path.join(tmp, "real", kind)
      _cli("featurize", os.path.join(args.real, REAL[kind]), "--out", out)
      real_paths = sorted(glob.glob(os.path.join(out, "*.npz")))
      real = realism.collect(real_paths)
      data[kind] = {}
      for collection in SIMULATED[kind]:
        _cli("synth", "--collection", collection, "--scale", "small",
             "--seed", str(args.seed), "--out", os.path.join(tmp, "sim"),
             "--quiet")
        sim_paths = _files(os.path.join(tmp, "sim"), collection)
        comparisons = realism.compare(real, realism.collect(sim_paths))
        data[kind][collection] = {
            c.name: {"real": c.real.tolist(), "inside": c.inside,
                     "sim_median": float(np.median(c.sim)),
                     "sim_mean": float(c.sim.mean())} for c in comparisons}
        lines += [f"## {kind}: {len(real)} real vs {len(sim_paths)} "
                  f"simulated ({collection})", ""]
        lines += _table(comparisons, one_real=len(real) == 1) + [""]
        keys = (["node_feat", "config_feat"] if kind == "tile" else
                ["node_feat", "node_config_feat"])
        for key in keys:
          unseen = _unseen_columns(real_paths, sim_paths, key)
          lines += [f"{key} columns whose real values leave the simulated "
                    f"range ({len(unseen)}):", ""]
          if unseen:
            lines += ["| column | real rows outside | real min..max | "
                      "simulated min..max |", "|---|---|---|---|"]
            lines += [f"| {j} | {o:.1%} | {_fmt(a)}..{_fmt(b)} | "
                      f"{_fmt(c)}..{_fmt(d)} |"
                      for j, o, a, b, c, d in unseen]
          lines.append("")
  report.write_report(args.report, lines)
  report.write_json(args.report, {"seed": args.seed, "stats": data})


if __name__ == "__main__":
  main()
