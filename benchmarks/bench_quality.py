"""Quality benchmark on SIMULATED data: GNN vs no-graph baseline vs random.

Usage:
  python -m benchmarks.bench_quality [--minutes M] [--seeds 0 1 2]
      [--collections ...] [--data DIR] [--report FILE]
      [--official-baseline DIR] [--reuse-runs] [--joins late early]
      [--no-config-only]

For each collection (simulated with `tpurank synth --scale small`, fixed
seed), trains the GNN and the config-only model (same loss, same budget of
M CPU-minutes, via `tpurank train`), scores every config of every validation
graph, and reports beside them a random ranking, the compiler default (first
config) where relevant, and the noise ceiling (Kendall tau between the
simulator's noiseless and measured runtimes: no predictor beats it on
average). Runtimes are simulated: these are not TpuGraphs results.

`--official-baseline DIR` adds the official TpuGraphs baselines
(google-research-datasets/tpu_graphs `layout_train.py`, `tiles_train.py`),
run outside this project on the same npz with their `test` split pointed at
our `valid` split: DIR/out/layout_<source>_<search>.csv (their ranking of
every config, best first) and DIR/out/tile/run_*.jsonz (their top-K errors).
`--reuse-runs` reads finished runs' summary.json instead of training again.
`--joins` trains the layout GNN once per join given (`trainer.hparams.JOINS`;
default: the default join alone), side by side on the same examples; the
default join's rows are "GNN", another's "GNN, <join> join".
`--no-config-only` leaves the config-only baseline out.
"""

import argparse
import csv
import glob
import gzip
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

from benchmarks import report

from schemas import npz_format
from simulator import synth
from trainer import hparams
from trainer import metrics

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def valid_graphs(data, collection):
  folder = npz_format.collection_dir(data, collection, "valid")
  return [npz_format.load_graph(f) for f in sorted(glob.glob(folder +
                                                             "/*.npz"))]


def reference_metrics(kind, graphs, seed) -> dict:
  """Random ranking, compiler default first, and the noise ceiling."""
  rng = np.random.default_rng(seed)
  rows = {"random": [], "compiler default (config 0)": [],
          "noise ceiling": []}
  for g in graphs:
    rt = g.config_runtime.astype(np.float64)
    norm = g.config_runtime_normalizers if kind == "tile" else None
    noiseless = g.read_extra(synth.NOISELESS_KEY)
    rows["random"].append(metrics.graph_metrics(
        kind, rng.permutation(len(rt)).astype(float), rt, norm))
    # The simulator measures the compiler's choice as config 0: picking it
    # is a top-1 choice only (it ranks nothing else).
    scaled = rt / np.maximum(norm, 1) if kind == "tile" else rt
    rows["compiler default (config 0)"].append(
        {"top1_error": float(scaled[0] / scaled.min() - 1)})
    rows["noise ceiling"].append(metrics.graph_metrics(kind, noiseless, rt,
                                                       norm))
  return {k: metrics.collection_metrics(kind, v) for k, v in rows.items()}


def official_baseline(collection, graphs, paths, base_dir) -> dict:
  """Metrics of the official baseline's predictions on our valid split."""
  kind = npz_format.collection_kind(collection)
  if kind == "tile":
    runs = sorted(glob.glob(os.path.join(base_dir, "out", "tile",
                                         "run_*.jsonz")), key=os.path.getmtime)
    if not runs:
      return {}
    with gzip.open(runs[-1]) as f:
      err = json.load(f)["final_error"]["test"]
    return {f"top{k}_error": float(err[str(k)]) for k in (1, 5, 10)}
  name = "_".join(collection.split(":"))
  csv_path = os.path.join(base_dir, "out", f"{name}.csv")
  if not os.path.exists(csv_path):
    return {}
  with open(csv_path) as f:
    ranking = {row["ID"]: [int(i) for i in row["TopConfigs"].split(";")]
               for row in csv.DictReader(f)}
  rows = []
  for g, path in zip(graphs, paths):
    order = ranking[npz_format.graph_id(collection, path)]
    position = np.empty(len(order))
    position[order] = np.arange(len(order))
    rows.append(metrics.graph_metrics(kind, position,
                                      g.config_runtime.astype(np.float64)))
  return metrics.collection_metrics(kind, rows)


REPORT = "benchmarks/results/quality.md"


def train_and_score(data, collection, out, minutes, seed, config_only,
                    reuse=False, records=None, join=None):
  cmd = [sys.executable, "-m", "tpurank.cli", "train", "--collection",
         collection, "--data", data, "--out", out, "--max-minutes",
         # One sample of configs (records) for every run; seeds vary the
         # initialisation and data order.
         str(minutes), "--train-seed", str(seed),
         # Only the metrics are used: the export (~20 s) is not measured.
         "--no-export"]
  if config_only:
    cmd.append("--config-only")
  if join:
    cmd += ["--join", join]
  if reuse and os.path.exists(os.path.join(out, "summary.json")):
    with open(os.path.join(out, "summary.json")) as f:
      return json.load(f)
  shutil.rmtree(out, ignore_errors=True)  # A stale backup would resume.
  if records and os.path.isdir(records):
    # The same train/valid examples for every run of the collection: runs
    # differ in model, initialisation and data order, not in the sample.
    shutil.copytree(records, os.path.join(out, "records"))
  start = time.time()
  subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL)
  summary = json.load(open(os.path.join(out, "summary.json")))
  summary["wall_seconds"] = time.time() - start
  return summary


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--minutes", type=float, default=10.0)
  parser.add_argument("--seeds", type=int, nargs="+", default=[0])
  parser.add_argument("--collections", nargs="+",
                      default=list(npz_format.COLLECTIONS))
  parser.add_argument("--data", default="bench_out/quality/data")
  parser.add_argument("--report", default=REPORT)
  parser.add_argument("--official-baseline", default=None, metavar="DIR")
  parser.add_argument("--reuse-runs", action="store_true")
  parser.add_argument("--joins", nargs="+", choices=hparams.JOINS,
                      default=[hparams.JOINS[0]],
                      help="layout joins to train side by side (default: "
                      "%(default)s)")
  parser.add_argument("--no-config-only", action="store_true",
                      help="leave out the config-only baseline")
  args = parser.parse_args()
  results = {}
  for c in args.collections:
    # Always written afresh (deterministic, seconds): data left by an
    # older simulator would silently mix data versions.
    shutil.rmtree(os.path.join(args.data, "npz", *c.split(":")),
                  ignore_errors=True)
    synth.synth_collection(c, args.data, seed=0, scale="small",
                           progress=False)
    kind = npz_format.collection_kind(c)
    graphs = valid_graphs(args.data, c)
    ref = reference_metrics(kind, graphs, 0)
    if args.official_baseline:
      paths = sorted(glob.glob(npz_format.collection_dir(
          args.data, c, "valid") + "/*.npz"))
      ref = {"official TpuGraphs baseline": official_baseline(
          c, graphs, paths, args.official_baseline), **ref}
    models = _models(kind, args.joins, not args.no_config_only)
    runs = {name: [] for name, *_ in models}
    # Records per join: the joins cut examples of different K
    # (`conversion.options.train_k`), so they cannot share one sample.
    records = {}
    for seed in args.seeds:
      for name, slug, config_only, join in models:
        key = join or hparams.JOINS[0]
        out = os.path.join(os.path.dirname(args.data), "runs",
                           c.replace(":", "_"), f"{slug}-{seed}")
        runs[name].append(train_and_score(args.data, c, out, args.minutes,
                                          seed, config_only, args.reuse_runs,
                                          records.get(key), join))
        records.setdefault(key, os.path.join(out, "records"))
        print(c, name, seed, runs[name][-1]["valid_metrics"], flush=True)
    results[c] = {"reference": ref, "runs": runs}
  _write(args, results)


def _models(kind, joins, config_only):
  """(report name, run folder, config-only, join flag) of each model."""
  models = []
  for join in (joins if kind == "layout" else [hparams.JOINS[0]]):
    if join == hparams.JOINS[0]:
      models.append(("GNN", "GNN", False, None))
    else:
      models.append((f"GNN, {join} join", f"GNN-{join}", False, join))
  if config_only:
    models.append(("config-only", "config-only", True, None))
  return models


def fmt(values):
  values = [v for v in values if v is not None]
  if not values:
    return "-"
  if len(values) == 1:
    return f"{values[0]:.3f}"
  return f"{np.mean(values):.3f} ± {np.std(values):.3f}"


def _command(args) -> str:
  """The command line that writes this report (flags left at their
  defaults omitted, except the budget and seeds)."""
  cmd = (f"python -m benchmarks.bench_quality --minutes {args.minutes:g} "
         f"--seeds {' '.join(map(str, args.seeds))}")
  if list(args.collections) != list(npz_format.COLLECTIONS):
    cmd += " --collections " + " ".join(args.collections)
  if args.joins != [hparams.JOINS[0]]:
    cmd += " --joins " + " ".join(args.joins)
  if args.no_config_only:
    cmd += " --no-config-only"
  if args.report != REPORT:
    cmd += f" --report {args.report}"
  return cmd


def _write(args, results):
  lines = ["# Quality on SIMULATED data", "",
           "Runtimes come from tpurank's simulator (README): these are not "
           "TpuGraphs results.", "",
           f"Command: `{_command(args)}`  ",
           f"Date: {time.strftime('%Y-%m-%d %H:%M')}; valid split of "
           "`tpurank synth --scale small --seed 0`; each model trained for "
           f"at most {args.minutes:g} minutes on 2 CPU cores (plus start-up, "
           "record writing and the final validation); mean ± std over "
           "training seeds (initialisation and data order; every run of a "
           "collection trains on the same sampled examples).", ""]
  for c, r in results.items():
    kind = npz_format.collection_kind(c)
    names = (["kendall_tau", "opa", "top1_error"] if kind == "layout" else
             ["top1_error", "top5_error", "top10_error"])
    lines += [f"## {c}", "", "| model | " + " | ".join(names) + " |",
              "|---|" + "---|" * len(names)]
    for name, runs in r["runs"].items():
      lines.append(f"| {name} | " + " | ".join(
          fmt([run["valid_metrics"].get(n) for run in runs])
          for n in names) + " |")
      guarded = [run["default_guard"] for run in runs
                 if run.get("default_guard")]
      if guarded:  # Tile: the ranking users get (trainer/default_guard).
        lines.append(f"| {name}, default guard | " + " | ".join(
            fmt([g["valid_metrics"].get(n) for g in guarded])
            for n in names) + " |")
    for name, m in r["reference"].items():
      lines.append(f"| {name} | " + " | ".join(fmt([m.get(n)])
                                               for n in names) + " |")
    lines.append("")
  lines += ["top1_error: how much slower the predicted best config is than "
            "the true best (TpuGraphs' top-K error, K = 1); for tile, on "
            "runtimes normalised by the default config's. *Default guard*: "
            "the tile ranking as `tpurank rank`/`score` give it, the "
            "compiler default kept ahead of every config the model is not "
            "confident beats it (margin calibrated on this validation "
            "split, so this row is optimistic by that much).", ""]
  report.write_report(args.report, lines)
  report.write_json(args.report, {"minutes": args.minutes,
                                  "seeds": args.seeds, "results": results})


if __name__ == "__main__":
  main()
