"""The whole path on the REAL TPU protos: featurize -> convert -> score.

Usage:
  python -m benchmarks.bench_real --tile-model DIR --layout-model DIR
      [--real ../shared/data/real_tpu] [--report FILE]

The models are trained on SIMULATED data (e.g. by `bench_quality`); the
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

from benchmarks import report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = {"layout:xla:random": "layout_module_tuning_data.pb",
         "tile:xla": "tile_tuning_data.pb"}


def _cli(*args) -> str:
  proc = subprocess.run([sys.executable, "-m", "tpurank.cli", *args],
                        cwd=ROOT, capture_output=True, text=True, check=True)
  return proc.stdout


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--tile-model", required=True)
  parser.add_argument("--layout-model", required=True)
  parser.add_argument("--real", default=os.path.join(
      ROOT, "..", "shared", "data", "real_tpu"))
  parser.add_argument("--report", default="benchmarks/results/real_tpu.md")
  args = parser.parse_args()
  # pylint: disable=g-import-not-at-top
  from schemas import npz_format
  lines = ["# Real TPU protos through tpurank (models trained on SIMULATED "
           "data)", "",
           f"Command: `python -m benchmarks.bench_real --tile-model "
           f"{args.tile_model} --layout-model {args.layout_model}`  ",
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
    csv = os.path.join(tmp, "submission.csv")
    _cli("score", "--model", args.tile_model, "--model", args.layout_model,
         "--data", os.path.join(tmp, "data"), "--split", "valid", "--out",
         csv, "--runner=DirectRunner", "--direct_running_mode=in_memory")
    with open(csv + ".summary.json") as f:
      summary = json.load(f)
    with open(csv + ".metrics.jsonl") as f:
      per_graph = [json.loads(line) for line in f]
  lines += ["", "## score (against the real runtimes)", "",
            f"{summary['rows']} rows, {summary['dead_letters']} dead "
            "letters.", "", "| graph | metrics |", "|---|---|"]
  for m in sorted(per_graph, key=lambda m: m["id"]):
    shown = ", ".join(f"{k} {v:.3f}" for k, v in m.items() if k != "id")
    lines.append(f"| {m['id']} | {shown} |")
  lines += ["", "Means: " + json.dumps(summary["metrics"])]
  report.write_report(args.report, lines)


if __name__ == "__main__":
  main()
