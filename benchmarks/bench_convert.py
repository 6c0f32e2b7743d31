"""Benchmark of the Beam conversion (`tpurank convert`) against bare np.load.

Usage:
  python -m benchmarks.bench_convert [--collections C ...] [--full]
      [--report FILE]

For each collection at `--scale small` (simulated, seed 0): the time to
`np.load` every array of every npz (the bound: reading the input at all),
the time of the conversion with the default runner (DirectRunner,
multi-processing over all cores), graphs/s, configs/s, input MB/s, the
output/input size ratio, and peak RSS (the main process and its largest
worker). `--full` adds one full-size layout graph (~40k nodes, 100k
configs) converted once as a train graph (bounded examples) and once as a
valid graph (every config). Each measurement runs in a fresh subprocess.
"""

import argparse
import dataclasses
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

from benchmarks import report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = r"""
import glob, json, os, resource, sys, time
import numpy as np
args = json.loads(sys.argv[1])
files = sorted(glob.glob(os.path.join(args["data"], "npz", "**", "*.npz"),
                         recursive=True))
start = time.perf_counter()
if args["mode"] == "np.load":
  for f in files:
    with np.load(f) as d:
      for k in d.files:
        d[k]
  stats = {}
else:
  from conversion import convert_job, options
  stats = convert_job.run(args["data"], args["collection"], args["out"],
                          options.ConvertOptions(**args["options"]),
                          args["beam_args"], args.get("splits"))
stats["seconds"] = time.perf_counter() - start
stats["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
stats["peak_rss_children_mb"] = resource.getrusage(
    resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps(stats))
"""


def _child(args: dict) -> dict:
  out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(args)],
                       capture_output=True, text=True, check=True, cwd=ROOT)
  return json.loads(out.stdout.strip().splitlines()[-1])


def _size(pattern: str) -> int:
  return sum(os.path.getsize(f) for f in glob.glob(pattern, recursive=True))


def measure(data, collection, out, options, beam_args=(), splits=None):
  """One collection: np.load time, conversion time, sizes, RSS."""
  load = _child({"mode": "np.load", "data": data})
  conv = _child({"mode": "convert", "data": data, "collection": collection,
                 "out": out, "options": options,
                 "beam_args": list(beam_args), "splits": splits})
  graphs = sum(s["graphs_converted"] for s in conv["splits"].values())
  configs = sum(s["configs"] for s in conv["splits"].values())
  in_bytes = _size(os.path.join(data, "npz", "**", "*.npz"))
  out_bytes = _size(os.path.join(out, "**", "*.tfrecord.gz"))
  return {"collection": collection, "graphs": graphs, "configs": configs,
          "examples": sum(s["examples"] for s in conv["splits"].values()),
          "load_s": load["seconds"], "convert_s": conv["seconds"],
          "graphs_per_s": graphs / conv["seconds"],
          "configs_per_s": configs / conv["seconds"],
          "in_mb_per_s": in_bytes / 1e6 / conv["seconds"],
          "in_mb": in_bytes / 1e6, "out_mb": out_bytes / 1e6,
          "size_ratio": out_bytes / max(in_bytes, 1),
          "rss_mb": conv["peak_rss_mb"],
          "worker_rss_mb": conv["peak_rss_children_mb"],
          "mismatches": conv["mismatches"]}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--full", action="store_true",
                      help="also one full-size layout graph")
  parser.add_argument("--collections", nargs="+", default=None,
                      help="default: all five")
  parser.add_argument("--full-nodes", type=int, default=40000)
  parser.add_argument("--full-configs", type=int, default=100000)
  parser.add_argument("--report", default="benchmarks/results/convert.md")
  args = parser.parse_args()
  # pylint: disable=g-import-not-at-top
  from conversion import options
  from pipeline import pipeline as pipeline_lib
  from schemas import npz_format
  from simulator import synth
  rows = []
  with tempfile.TemporaryDirectory() as tmp:
    for c in args.collections or npz_format.COLLECTIONS:
      data = os.path.join(tmp, "data", c.replace(":", "_"))
      synth.synth_collection(c, data, seed=0, scale="small", progress=False)
      opts = pipeline_lib.convert_options(npz_format.collection_kind(c))
      rows.append(measure(data, c, os.path.join(tmp, "out", c), vars(opts)))
      print(json.dumps(rows[-1]), flush=True)
    if args.full:
      import numpy as np
      data = os.path.join(tmp, "full")
      c = "layout:xla:random"
      for split in ("train", "valid"):
        os.makedirs(npz_format.collection_dir(data, c, split))
      path = os.path.join(npz_format.collection_dir(data, c, "valid"),
                          "big.npz")
      synth.write_layout_graph(path, np.random.default_rng(0),
                               synth.SCALES["full"], "xla", "random",
                               nodes=args.full_nodes,
                               configs=args.full_configs)
      os.link(path, os.path.join(npz_format.collection_dir(data, c, "train"),
                                 "big.npz"))
      opts = vars(pipeline_lib.convert_options("layout"))
      for split in ("train", "valid"):
        one = os.path.join(tmp, "full1", split)
        os.makedirs(npz_format.collection_dir(one, c, split))
        os.link(path, os.path.join(npz_format.collection_dir(one, c, split),
                                   "big.npz"))
        row = measure(one, c, os.path.join(tmp, "fullout", split), opts,
                      ["--runner=DirectRunner",
                       "--direct_running_mode=in_memory"], [split])
        row["collection"] = f"full-size graph as {split}"
        rows.append(row)
        print(json.dumps(row), flush=True)
  _write(args, rows, dict(dataclasses.asdict(options.ConvertOptions()),
                          max_examples=options.MAX_EXAMPLES))


def _write(args, rows, convert_defaults):
  lines = ["# Conversion (Beam) on SIMULATED data", "",
           f"Command: `python -m benchmarks.bench_convert"
           + (f" --collections {' '.join(args.collections)}"
              if args.collections else "")
           + f"{' --full' if args.full else ''}`  ",
           f"Date: {time.strftime('%Y-%m-%d %H:%M')}; 2 CPU cores; "
           "collections from `tpurank synth --scale small --seed 0`; "
           f"conversion options {json.dumps(convert_defaults)} (conversion/"
           "options.py); runner: DirectRunner multi-processing over all "
           "cores (the full-size graph: in-memory, one graph cannot be "
           "split). `np.load` = reading every array of the same files, "
           "the bound. Size ratio = output .tfrecord.gz bytes / input .npz "
           "bytes.", "",
           "| input | graphs | configs | examples | np.load s | convert s | "
           "ratio to np.load | graphs/s | configs/s | input MB/s | in MB | "
           "out MB | size ratio | peak RSS main / worker MB |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
  for r in rows:
    lines.append(
        f"| {r['collection']} | {r['graphs']} | {r['configs']} | "
        f"{r['examples']} | {r['load_s']:.2f} | {r['convert_s']:.1f} | "
        f"{r['convert_s'] / max(r['load_s'], 1e-9):.0f}x | "
        f"{r['graphs_per_s']:.2f} | {r['configs_per_s']:.0f} | "
        f"{r['in_mb_per_s']:.2f} | {r['in_mb']:.1f} | {r['out_mb']:.1f} | "
        f"{r['size_ratio']:.2f} | {r['rss_mb']:.0f} / "
        f"{r['worker_rss_mb']:.0f} |")
  lines += ["", "Counts reconciled in every run (graphs in = converted + "
            "dead letters)." if not any(r["mismatches"] for r in rows) else
            "COUNTS DID NOT RECONCILE: " + json.dumps(
                [r["mismatches"] for r in rows])]
  report.write_report(args.report, lines)
  report.write_json(args.report, {"rows": rows})


if __name__ == "__main__":
  main()
