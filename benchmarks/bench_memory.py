"""Peak memory of training on and scoring one full-size layout graph.

Usage:
  python -m benchmarks.bench_memory [--nodes 44000] [--configs 100000]
      [--train-minutes 2] [--report FILE]

One simulated layout graph of real-dataset size (~44k nodes, 100k configs,
512 configurable nodes; ~260 MB npz) is (1) trained on with `tpurank train`
(its configs stream in chunks of K: records hold at most --max-examples
chunks of the train graph; a small graph is the validation split) and (2)
scored with the exported model in a fresh process, configs streamed in
chunks exactly as `score_graph` does, for the first --score-configs configs
(0: all; on 2 CPU cores all 100k take long, and the RSS marks show memory
flat after the first chunks). Each step's peak RSS is its own process's
(ru_maxrss).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

from benchmarks import report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_SCORE = r"""
import json, resource, sys, time
from conversion import examples
from schemas import npz_format
from serving.saved_model_scorer import SavedModelScorer
model, path, k, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(
    sys.argv[4])
g = npz_format.load_graph(path)
scorer = SavedModelScorer(model, k=k, batch=1)
rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
start, done, marks = time.perf_counter(), 0, []
# The same stream of chunks as score_graph, stopped after `limit` configs.
for ex in examples.graph_examples(g, "layout:x:big", k, "test", 2):
  scores, index = scorer.score_examples([ex])
  done += int((index >= 0).sum())
  if not marks or done >= 2 * marks[-1][0]:
    marks.append((done, rss()))
  if limit and done >= limit:
    break
print(json.dumps({"seconds": time.perf_counter() - start, "scored": done,
                  "configs": g.num_configs, "rss_marks": marks,
                  "peak_rss_mb": rss()}))
"""


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--nodes", type=int, default=44000)
  parser.add_argument("--configs", type=int, default=100000)
  parser.add_argument("--train-minutes", type=float, default=2.0)
  parser.add_argument("--k", type=int, default=16)
  parser.add_argument("--score-k", type=int, default=64)
  parser.add_argument("--score-configs", type=int, default=5000,
                      help="score this many configs (0: all); peak RSS is "
                      "reached after the first chunks, time is linear")
  parser.add_argument("--report", default="benchmarks/results/memory.md")
  args = parser.parse_args()
  # pylint: disable=g-import-not-at-top
  import numpy as np
  from schemas import npz_format
  from simulator import synth
  c = "layout:xla:random"
  with tempfile.TemporaryDirectory() as tmp:
    data = os.path.join(tmp, "data")
    train = npz_format.collection_dir(data, c, "train")
    os.makedirs(train)
    big = os.path.join(train, "big.npz")
    start = time.perf_counter()
    nodes, configs = synth.write_layout_graph(
        big, np.random.default_rng(0), synth.SCALES["full"], "xla", "random",
        nodes=args.nodes, configs=args.configs)
    synth_s = time.perf_counter() - start
    npz_mb = os.path.getsize(big) / 1e6
    valid = npz_format.collection_dir(data, c, "valid")
    os.makedirs(valid)
    synth.write_layout_graph(os.path.join(valid, "small.npz"),
                             np.random.default_rng(1), synth.SCALES["tiny"],
                             "xla", "random")
    out = os.path.join(tmp, "run")
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "tpurank.cli", "train", "--collection", c,
         "--data", data, "--out", out, "--max-minutes",
         str(args.train_minutes), "--k", str(args.k)], cwd=ROOT,
        capture_output=True, text=True, check=True)
    train_s = time.perf_counter() - start
    train_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    summary = json.load(open(os.path.join(out, "summary.json")))
    score = json.loads(subprocess.run(
        [sys.executable, "-c", _SCORE, summary["export"], big,
         str(args.score_k), str(args.score_configs)], cwd=ROOT, capture_output=True, text=True,
        check=True).stdout.strip().splitlines()[-1])
  rows = [
      ("graph", f"{nodes} nodes, {configs} configs, {npz_mb:.0f} MB npz "
                f"(written in {synth_s:.0f} s)"),
      ("train (`tpurank train`, records + training, "
       f"{args.train_minutes:g} min budget)",
       f"{train_s:.0f} s wall, {summary['train_examples']} train examples "
       f"of K={args.k}; peak RSS {train_rss:.0f} MB"),
      (f"score (chunks of {args.score_k}, streamed)",
       f"{score['scored']} of {score['configs']} configs in "
       f"{score['seconds']:.0f} s ({score['scored'] / score['seconds']:.0f} "
       f"configs/s, so all {score['configs']} in ~"
       f"{score['configs'] / score['scored'] * score['seconds'] / 60:.0f} "
       f"min); peak RSS {score['peak_rss_mb']:.0f} MB; RSS (MB) after n "
       "configs: " + ", ".join(f"{n}: {r:.0f}" for n, r in
                                score["rss_marks"])),
  ]
  lines = ["# Memory: one full-size layout graph (SIMULATED)", "",
           f"Command: `python -m benchmarks.bench_memory --nodes {args.nodes}"
           f" --configs {args.configs} --train-minutes "
           f"{args.train_minutes:g}`  ",
           f"Date: {time.strftime('%Y-%m-%d %H:%M')}; 2 CPU cores. Peak RSS "
           "is that step's process (the largest child for training, which "
           "runs as one process).", "", "| step | result |", "|---|---|"]
  lines += [f"| {a} | {b} |" for a, b in rows]
  report.write_report(args.report, lines)


if __name__ == "__main__":
  main()
