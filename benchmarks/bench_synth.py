"""Benchmark of `tpurank synth`: throughput per scale and peak RSS of one graph.

Usage:
  python -m benchmarks.bench_synth [--full-graphs N] [--report FILE]

Writes a Markdown report (default benchmarks/results/synth.md) with the
command that produced it. Each measurement runs in a fresh subprocess so its
peak RSS (ru_maxrss) is its own.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from benchmarks import report

_CHILD = r"""
import json, os, resource, sys, time
import numpy as np
from simulator import synth
args = json.loads(sys.argv[1])
start = time.perf_counter()
if args["mode"] == "collection":
  stats = synth.synth_collection(args["collection"], args["out"],
                                 args["graphs"], 0, args["scale"],
                                 progress=False)
else:
  rng = np.random.default_rng(0)
  nodes, configs = synth.write_layout_graph(
      os.path.join(args["out"], "one.npz"), rng, synth.SCALES["full"], "xla",
      "random", nodes=args["nodes"], configs=args["configs"])
  stats = {"graphs": 1, "nodes": nodes, "configs": configs,
           "bytes": os.path.getsize(os.path.join(args["out"], "one.npz"))}
stats["seconds"] = time.perf_counter() - start
stats["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(stats))
"""


def _run(args: dict) -> dict:
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(args)],
                       capture_output=True, text=True, check=True, cwd=root)
  return json.loads(out.stdout.strip().splitlines()[-1])


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--full-graphs", type=int, default=3,
                      help="graphs per collection at --scale full")
  parser.add_argument("--report", default="benchmarks/results/synth.md")
  args = parser.parse_args()
  collections = ("tile:xla", "layout:xla:random", "layout:xla:default",
                 "layout:nlp:random", "layout:nlp:default")
  rows = []
  with tempfile.TemporaryDirectory() as tmp:
    for scale, graphs in (("small", None), ("full", args.full_graphs)):
      for c in collections:
        n = graphs if graphs is None or c != "tile:xla" else max(graphs, 100)
        s = _run({"mode": "collection", "collection": c, "graphs": n,
                  "scale": scale, "out": os.path.join(tmp, scale)})
        rows.append((scale, c, s))
        print(scale, c, s, flush=True)
    one = _run({"mode": "one", "nodes": 40000, "configs": 100000,
                "out": tmp})
  lines = [
      "# Simulator benchmark (`tpurank synth`)", "",
      "Runtimes written are SIMULATED (see README); this measures the "
      "simulator's own speed and memory on this machine (2 cores).", "",
      f"Command: `python -m benchmarks.bench_synth --full-graphs "
      f"{args.full_graphs}`  ", f"Date: {time.strftime('%Y-%m-%d %H:%M')}",
      "", "| scale | collection | graphs | nodes | configs | MB written | s | "
      "graphs/s | MB/s | peak RSS MB |", "|---|---|---|---|---|---|---|---|---|---|"]
  for scale, c, s in rows:
    mb = s["bytes"] / 1e6
    lines.append(f"| {scale} | {c} | {s['graphs']} | {s['nodes']} | "
                 f"{s['configs']} | {mb:.1f} | {s['seconds']:.1f} | "
                 f"{s['graphs'] / s['seconds']:.2f} | {mb / s['seconds']:.2f} |"
                 f" {s['peak_rss_mb']:.0f} |")
  mb = one["bytes"] / 1e6
  lines += ["", "One full-size layout graph (`write_layout_graph`, xla, "
            "random search):", "",
            f"- {one['nodes']} nodes, {one['configs']} configs, "
            f"{mb:.0f} MB npz written in {one['seconds']:.0f} s "
            f"({mb / one['seconds']:.1f} MB/s);",
            f"- peak RSS {one['peak_rss_mb']:.0f} MB (process total, "
            "Python and NumPy included)."]
  report.write_report(args.report, lines)


if __name__ == "__main__":
  main()
