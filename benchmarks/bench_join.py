"""Late vs early join, side by side: ranking speed and memory of layout models.

  python -m benchmarks.bench_join [--nodes 10000] [--configs 1000]
      [--big-nodes 1000] [--big-configs 100000]

For each join, an untrained default-architecture layout model (speed does
not depend on the weights) ranks, after one warm-up:

* every config of a ~10k-node SIMULATED graph in-process (npz path ->
  scores: load, prune, examples, model), and through `tpurank serve` REST;
* every config of a 1k-node graph with 100k configs in-process, in a child
  process whose peak RSS is read.

Every measurement runs in its own child process, one after the other, and
the report (benchmarks/results/join.md + .json) gives the command.
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
JOINS = ("late", "early")


def make_model(graph_path: str, base: str, join: str) -> str:
  """Exports an untrained default layout model of `join` under base/tpurank/1."""
  # pylint: disable=g-import-not-at-top
  import numpy as np
  from conversion import examples
  from schemas import npz_format
  from trainer import export
  from trainer import hparams
  from trainer import input_fn
  from trainer import model as model_lib
  g = npz_format.load_graph(graph_path)
  ex = list(examples.graph_examples(g, "layout:x:g", 4, "valid", hops=1))
  graph = input_fn.model_input("layout", np.array(ex[:2], dtype=object), join)
  stats = model_lib.FeatureStats(np.zeros(140, np.float32),
                                 np.ones(140, np.float32),
                                 np.zeros(24, np.float32),
                                 np.ones(24, np.float32))
  sm = model_lib.build_score_model(
      hparams.ModelConfig(kind="layout", join=join),
      graph.spec.relax(num_components=True, num_nodes=True, num_edges=True),
      stats)
  return export.save(sm, "layout", os.path.join(base, "tpurank", "1"), {},
                     join)


def _peak_rss_mb() -> float:
  with open("/proc/self/status") as f:
    for line in f:
      if line.startswith("VmHWM:"):
        return int(line.split()[1]) / 1024
  return float("nan")


def measure(args) -> dict:
  """(child) Ranks one graph with one model (in-process or REST), twice."""
  # pylint: disable=g-import-not-at-top
  from schemas import npz_format
  from serving import client
  from serving import saved_model_scorer
  if args.server:
    c = client.connect(args.server)
    score = lambda: saved_model_scorer.score_graph(
        c.score_examples, npz_format.load_graph(args.graph), "layout:x:g",
        join=args.join)
  else:
    scorer = saved_model_scorer.SavedModelScorer(args.model)
    score = lambda: scorer.score_graph(npz_format.load_graph(args.graph),
                                       "layout:x:g")
  score()  # Warm-up: tracing, first allocation.
  start = time.perf_counter()
  scores = score()
  seconds = time.perf_counter() - start
  return {"seconds": seconds, "configs": len(scores),
          "finite": bool((scores == scores).all()),
          "peak_rss_mb": _peak_rss_mb()}


def _child(*argv) -> dict:
  out = subprocess.run([sys.executable, "-m", "benchmarks.bench_join",
                        "--child", *argv], cwd=ROOT, check=True,
                       capture_output=True, text=True)
  return json.loads(out.stdout.strip().splitlines()[-1])


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--nodes", type=int, default=10000)
  parser.add_argument("--configs", type=int, default=1000)
  parser.add_argument("--big-nodes", type=int, default=1000)
  parser.add_argument("--big-configs", type=int, default=100000)
  parser.add_argument("--report", default="benchmarks/results/join.md")
  parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--graph", help=argparse.SUPPRESS)
  parser.add_argument("--model", help=argparse.SUPPRESS)
  parser.add_argument("--server", help=argparse.SUPPRESS)
  parser.add_argument("--join", default="late", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    print(json.dumps(measure(args)))
    return
  # pylint: disable=g-import-not-at-top
  import numpy as np
  from simulator import synth
  rows = []
  with tempfile.TemporaryDirectory() as tmp:
    graphs = {}
    for name, nodes, configs in (("mid", args.nodes, args.configs),
                                 ("big", args.big_nodes, args.big_configs)):
      graphs[name] = os.path.join(tmp, f"{name}.npz")
      n, c = synth.write_layout_graph(
          graphs[name], np.random.default_rng(0), synth.SCALES["full"], "xla",
          "random", nodes=nodes, configs=configs)
      graphs[name + "_desc"] = f"{n} nodes, {c} configs"
    for join in JOINS:
      base = os.path.join(tmp, join)
      model = make_model(graphs["mid"], base, join)
      row = {"join": join}
      r = _child("--graph", graphs["mid"], "--model", model)
      row["rank_s"], row["rank_rss_mb"] = r["seconds"], r["peak_rss_mb"]
      server = subprocess.Popen(
          [sys.executable, "-m", "tpurank.cli", "serve", "--model-base",
           base, "--port", "0", "--grpc-port", "0"], cwd=ROOT,
          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
      try:
        info = json.loads(server.stdout.readline())
        r = _child("--graph", graphs["mid"], "--server", info["rest"],
                   "--join", join)
        row["rest_s"] = r["seconds"]
      finally:
        server.terminate()
        server.wait()
      r = _child("--graph", graphs["big"], "--model", model)
      row["big_s"], row["big_rss_mb"] = r["seconds"], r["peak_rss_mb"]
      rows.append(row)
      print(json.dumps(row), flush=True)
  cmd = (f"python -m benchmarks.bench_join --nodes {args.nodes} --configs "
         f"{args.configs} --big-nodes {args.big_nodes} --big-configs "
         f"{args.big_configs}")
  lines = [
      "# Late vs early join: layout ranking speed and memory", "",
      "SIMULATED graphs (`tpurank synth`), untrained default-architecture "
      "models (speed does not depend on the weights); 2 CPU cores; each "
      "figure after one warm-up, in its own process.", "",
      f"Command: `{cmd}`  ", f"Date: {time.strftime('%Y-%m-%d %H:%M')}  ",
      f"Graphs: {graphs['mid_desc']} (rank, REST); {graphs['big_desc']} "
      "(bulk).", "",
      "| join | rank in-process (s) | peak RSS (MB) | rank via REST (s) | "
      "bulk in-process (s) | bulk configs/s | bulk peak RSS (MB) |",
      "|---|---|---|---|---|---|---|"]
  for r in rows:
    lines.append(
        f"| {r['join']} | {r['rank_s']:.2f} | {r['rank_rss_mb']:.0f} | "
        f"{r['rest_s']:.2f} | {r['big_s']:.1f} | "
        f"{args.big_configs / r['big_s']:.0f} | {r['big_rss_mb']:.0f} |")
  report.write_report(args.report, lines)
  report.write_json(args.report, {"command": cmd, "rows": rows})


if __name__ == "__main__":
  main()
