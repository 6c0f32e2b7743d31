"""Quality across simulated chips: does the model hold when the costs change?

Usage:
  python -m benchmarks.bench_chips [--minutes 10] [--seeds 0]
      [--chips default wide lean] [--collection layout:xla:random]
      [--data DIR] [--report FILE]

For each chip of `simulator.hardware.CHIPS` (other tile sizes, bandwidth,
matrix unit, launch costs, copy and propagation rules), writes the
collection with `tpurank synth --chip CHIP --scale small --seed 0`, trains
the default GNN on it for the trainer's budget (`tpurank train`, the same
command and defaults on every chip: nothing is tuned per chip) and reports
its valid Kendall tau beside that data's noise ceiling (the tau between the
chip's noiseless and measured runtimes, `bench_quality.reference_metrics`).
The model is the same on every chip: it weighs the real TPU tilings (8, 16
or 32 sublanes by 128 lanes, and 256 lanes) and two propagation rules (XLA's,
and one-operand elementwise ops only) and learns which the data's chip has
(`trainer.learned_tiling`, `trainer.learned_propagation`); the report shows
what it learned. Every runtime is SIMULATED.
"""

import argparse
import os
import shutil
import time

import numpy as np

from benchmarks import bench_quality
from benchmarks import report
from schemas import npz_format
from schemas import opcodes
from simulator import hardware
from simulator import synth

GOAL = 0.9  # Share of each chip's noise ceiling the model must reach.


def run_chip(chip: str, args) -> dict:
  """Synthesizes the chip's collection, trains on it, scores it."""
  data = os.path.join(args.data, chip, "data")
  shutil.rmtree(data, ignore_errors=True)  # Never a stale data version.
  synth.synth_collection(args.collection, data, seed=0, scale="small",
                         progress=False, chip=chip)
  kind = npz_format.collection_kind(args.collection)
  graphs = bench_quality.valid_graphs(data, args.collection)
  ceiling = bench_quality.reference_metrics(kind, graphs, 0)["noise ceiling"]
  runs, records = [], None
  for seed in args.seeds:
    out = os.path.join(args.data, chip, "runs", f"GNN-{seed}")
    runs.append(bench_quality.train_and_score(
        data, args.collection, out, args.minutes, seed, False,
        records=records))
    records = records or os.path.join(out, "records")
    print(chip, seed, runs[-1]["valid_metrics"], flush=True)
  spread = [float(g.config_runtime.max() / max(g.config_runtime.min(), 1))
            for g in graphs]
  sim = hardware.chip(chip)
  return {"chip": chip, "ceiling": ceiling["kendall_tau"],
          "chip_tiling": f"{sim.sublanes}x{sim.lanes}",
          "tau": [r["valid_metrics"]["kendall_tau"] for r in runs],
          "best_epoch": [r.get("best_epoch") for r in runs],
          "tiling": [_tiling(r.get("learned_tiling")) for r in runs],
          "rule": [_rule(r.get("learned_propagation")) for r in runs],
          "chip_rule": ("unary" if sim.propagates <= opcodes.ELEMENTWISE_UNARY
                        else "elementwise"),
          "median_spread": float(np.median(spread))}


def _tiling(learned) -> str:
  """"sublanes x lanes" of the heaviest choices of a run's learned tiling,
  with their weights."""
  if not learned:
    return "-"
  best = {k: max(v.items(), key=lambda kv: kv[1]) for k, v in learned.items()}
  return (f"{best['sublanes'][0]}x{best['lanes'][0]} "
          f"({best['sublanes'][1]:.2f}, {best['lanes'][1]:.2f})")


def _rule(learned) -> str:
  """The heaviest rule of a run's learned propagation, with its weight."""
  if not learned:
    return "-"
  rule, weight = max(learned.items(), key=lambda kv: kv[1])
  return f"{rule} ({weight:.2f})"


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--minutes", type=float, default=10.0)
  parser.add_argument("--seeds", type=int, nargs="+", default=[0])
  parser.add_argument("--chips", nargs="+", default=list(hardware.CHIPS),
                      choices=list(hardware.CHIPS))
  parser.add_argument("--collection", default="layout:xla:random",
                      choices=[c for c in npz_format.COLLECTIONS
                               if c.startswith("layout")])
  parser.add_argument("--data", default="bench_out/chips")
  parser.add_argument("--report", default="benchmarks/results/chips.md")
  args = parser.parse_args()
  rows = [run_chip(chip, args) for chip in args.chips]
  cmd = (f"python -m benchmarks.bench_chips --minutes {args.minutes:g} "
         f"--seeds {' '.join(map(str, args.seeds))} --chips "
         f"{' '.join(args.chips)} --collection {args.collection}")
  lines = [
      "# Quality across simulated chips", "",
      "SIMULATED runtimes (`tpurank synth --chip`, README \"Chip "
      "variants\"): each chip prices the same programs with its own "
      "constants and copy/propagation rules. The default GNN, unchanged, "
      f"trained for at most {args.minutes:g} minutes on 2 CPU cores per run "
      "(early stopping on the valid tau ends it sooner: see the best "
      "epoch). Learned tiling: the sublanes x lanes the model settled on "
      "per run (`trainer.learned_tiling`), with the weights it gives "
      "them; learned rule: the propagation rule it settled on "
      "(`trainer.learned_propagation`: every same-shape elementwise op "
      "inherits a layout, or the one-operand ones only).", "",
      f"Command: `{cmd}`  ", f"Date: {time.strftime('%Y-%m-%d %H:%M')}; "
      f"valid split of {args.collection} (`--scale small --seed 0`); mean "
      "± std over training seeds.", "",
      "| chip | Kendall tau | noise ceiling | share of the ceiling | "
      f"goal ({GOAL:.0%}) | best epoch | learned tiling | chip's tiling | "
      "learned rule | chip's rule | median spread (slowest / fastest) |",
      "|---|---|---|---|---|---|---|---|---|---|---|"]
  for r in rows:
    share = np.mean(r["tau"]) / r["ceiling"]
    lines.append(
        f"| {r['chip']} | {bench_quality.fmt(r['tau'])} | "
        f"{r['ceiling']:.3f} | {share:.1%} | "
        f"{'met' if share >= GOAL else 'missed'} | "
        f"{', '.join(str(e) for e in r['best_epoch'])} | "
        f"{'; '.join(r['tiling'])} | {r['chip_tiling']} | "
        f"{'; '.join(r['rule'])} | {r['chip_rule']} | "
        f"{r['median_spread']:.2f} |")
  report.write_report(args.report, lines)
  report.write_json(args.report, {"command": cmd, "rows": rows})


if __name__ == "__main__":
  main()
