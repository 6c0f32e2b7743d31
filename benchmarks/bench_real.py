"""The whole path on the REAL TPU protos: featurize -> convert -> score.

Usage:
  python -m benchmarks.bench_real [--tile-model DIR] [--layout-model DIR]
      [--train-minutes 3] [--real ../shared/data/real_tpu] [--report FILE]

The models are trained on SIMULATED data (here, unless given); the
protos are real TPU measurements (one program with 112 successful layout
runs, 10 kernels with tile runs). The raw files sit in the `valid` split of
a scratch data directory, so scoring reports metrics against their real
runtimes. One program and ten kernels are far too few to rate a model:
these numbers show the path works on real HLO, not how well it ranks.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from benchmarks import report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = {"layout:xla:random": "layout_module_tuning_data.pb",
         "tile:xla": "tile_tuning_data.pb"}


def _cli(*args) -> str:
  proc = subprocess.run([sys.executable, "-m", "tpurank.cli", *args],
                        cwd=ROOT, capture_output=True, text=True, check=True)
  return proc.stdout


def _train(args, collection: str) -> str:
  """Trains a model on `tpurank synth --scale small --seed 0` data (made
  here, fresh) for `--train-minutes`; returns its export."""
  data = os.path.join(args.work, "data")
  out = os.path.join(args.work, "models", collection.replace(":", "_"))
  subprocess.run(["rm", "-rf", out, os.path.join(
      data, "npz", *collection.split(":"))], check=True)
  _cli("synth", "--collection", collection, "--scale", "small", "--seed",
       "0", "--out", data, "--quiet")
  _cli("train", "--collection", collection, "--data", data, "--out", out,
       "--max-minutes", str(args.train_minutes))
  return os.path.join(out, "export")


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--tile-model", default=None,
                      help="default: train one (see --train-minutes)")
  parser.add_argument("--layout-model", default=None,
                      help="default: train one on layout:xla:random")
  parser.add_argument("--train-minutes", type=float, default=3.0,
                      help="budget of each model trained here")
  parser.add_argument("--work", default="bench_out/real",
                      help="simulated data and trained models")
  parser.add_argument("--real", default=os.path.join(
      ROOT, "..", "shared", "data", "real_tpu"))
  parser.add_argument("--report", default="benchmarks/results/real_tpu.md")
  args = parser.parse_args()
  # pylint: disable=g-import-not-at-top
  from schemas import npz_format
  command = " ".join(
      f"--{k.replace('_', '-')} {v}" for k, v in (
          ("tile_model", args.tile_model), ("layout_model", args.layout_model),
          ("train_minutes", args.train_minutes)) if v is not None)
  args.tile_model = args.tile_model or _train(args, "tile:xla")
  args.layout_model = args.layout_model or _train(args, "layout:xla:random")
  lines = ["# Real TPU protos through tpurank (models trained on SIMULATED "
           "data)", "",
           f"Command: `python -m benchmarks.bench_real {command}`  ",
           f"Date: {time.strftime('%Y-%m-%d %H:%M')}. The protos are real "
           "TPU measurements; the models never saw real data. One program "
           "and ten kernels cannot rate a model: this shows that the path "
           "runs on real HLO, not how well tpurank ranks real configs.", ""]
  with tempfile.TemporaryDirectory() as tmp:
    lines += ["## featurize", "", "```"]
    for c, name in FILES.items():
      raw = os.path.join(args.real, name)
      lines += _cli("featurize", raw, "--out",
                    os.path.join(tmp, "npz_out", c)).strip().splitlines()[:-1]
      folder = npz_format.collection_dir(os.path.join(tmp, "data"), c,
                                         "valid")
      os.makedirs(folder)
      os.symlink(os.path.abspath(raw), os.path.join(folder, name))
    lines += ["```", "", "## convert (raw .pb in, GraphTensor records out)",
              "", "| collection | graphs | configs | duplicates merged | "
              "examples |", "|---|---|---|---|---|"]
    for c in FILES:
      out = _cli("convert", "--data", os.path.join(tmp, "data"),
                 "--collection", c, "--out", os.path.join(tmp, "rec", c),
                 "--splits", "valid", "--runner=DirectRunner",
                 "--direct_running_mode=in_memory")
      s = json.loads(out.strip().splitlines()[-1])["splits"]["valid"]
      lines.append(f"| {c} | {s['graphs_converted']} | {s['configs']} | "
                   f"{s['configs_merged']} | {s['examples']} |")
    scored = {}
    for name, flags in (("guarded", []), ("raw", ["--no-default-guard"])):
      csv = os.path.join(tmp, f"{name}.csv")
      _cli("score", "--model", args.tile_model, "--model", args.layout_model,
           "--data", os.path.join(tmp, "data"), "--split", "valid", "--out",
           csv, "--runner=DirectRunner", "--direct_running_mode=in_memory",
           *flags)
      with open(csv + ".summary.json") as f:
        summary = json.load(f)
      with open(csv + ".metrics.jsonl") as f:
        scored[name] = {m["id"]: m for m in map(json.loads, f)}
    defaults = _default_errors(os.path.join(tmp, "data"))
  lines += ["", "## score (against the real runtimes)", "",
            f"{summary['rows']} rows, {summary['dead_letters']} dead "
            "letters.", "",
            "Tile kernels: the compiler default's own top-1 error beside "
            "the model's ranking, raw (`--no-default-guard`) and as "
            "`tpurank score` gives it (the default kept ahead of configs "
            "the model is not confident beat it, `trainer/default_guard`).",
            "", "| kernel | configs | default top1 | raw top1 | raw top5 | "
            "guarded top1 | guarded top5 |", "|---|---|---|---|---|---|---|"]
  tile_rows = []
  for gid in sorted(g for g in scored["raw"] if g.startswith("tile")):
    raw, guarded = scored["raw"][gid], scored["guarded"][gid]
    row = [defaults[gid][1], raw["top1_error"], raw["top5_error"],
           guarded["top1_error"], guarded["top5_error"]]
    tile_rows.append(row)
    lines.append(f"| {gid.split(':')[-1]} | {defaults[gid][0]} | " +
                 " | ".join(f"{v:.3f}" for v in row) + " |")
  if tile_rows:
    lines.append("| **mean** | | " + " | ".join(
        f"**{v:.3f}**" for v in np.mean(tile_rows, axis=0)) + " |")
  lines += ["", "The layout program (one program: this shows the path "
            "works and the scores do not saturate, not how well tpurank "
            "ranks real layouts):", "", "| graph | metrics |", "|---|---|"]
  for gid, m in sorted(scored["raw"].items()):
    if gid.startswith("layout"):
      shown = ", ".join(f"{k} {v:.3f}" for k, v in m.items() if k != "id")
      lines.append(f"| {gid} | {shown} |")
  report.write_report(args.report, lines)
  report.write_json(args.report, {"scored": scored, "defaults": defaults})


def _default_errors(data: str) -> dict:
  """{graph id: (configs, the compiler default's top-1 error)} of the tile
  kernels (config 0 is the default, `tpurank featurize` keeps it first)."""
  # pylint: disable=g-import-not-at-top
  from featurize import tuning
  from schemas import npz_format
  out = {}
  folder = npz_format.collection_dir(data, "tile:xla", "valid")
  for name in os.listdir(folder):
    with tempfile.TemporaryDirectory() as tmp:
      for path in tuning.featurize(os.path.join(folder, name), tmp).files:
        g = npz_format.load_graph(path)
        rt = g.config_runtime / np.maximum(g.config_runtime_normalizers, 1)
        gid = npz_format.graph_id("tile:xla", path)
        out[gid] = (g.num_configs, float(rt[0] / rt.min() - 1))
  return out


if __name__ == "__main__":
  main()
