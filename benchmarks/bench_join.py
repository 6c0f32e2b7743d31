"""Late vs early join, side by side: ranking speed and memory of layout models.

  python -m benchmarks.bench_join [--nodes 10000] [--configs 1000]
      [--big-nodes 1000] [--big-configs 100000]

For each join, an untrained default-architecture layout model (speed does
not depend on the weights) ranks, after one warm-up (median of 5 calls; 1
for the 100k configs):

* every config of a ~10k-node SIMULATED graph in-process (npz path ->
  scores: load, prune, the plain-tensor `rank` signature), and through
  `tpurank serve` REST and gRPC (the same signature, as `tpurank rank
  --server` calls it);
* every config of a 1k-node graph with 100k configs in-process, in a child
  process whose peak RSS is read;
* and trains (each join's default: early with XLA and padding, late
  without on CPU; batch of 4 graphs) on a ~44k-node graph for a few timed
  steps: configs/s and peak RSS, at K=16 configs per example and, for the
  late join, at K=64 and 128 too. Training reads chunks of K configs, so
  the graph's own config count (here 2,000) does not change the per-step
  cost.

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


def make_model(graph_path: str, base: str, join: str,
               kind: str = "layout") -> str:
  """Exports an untrained default model of `kind` (layout: of `join`) under
  base/tpurank/1."""
  # pylint: disable=g-import-not-at-top
  import numpy as np
  from conversion import examples
  from schemas import npz_format
  from trainer import export
  from trainer import hparams
  from trainer import input_fn
  from trainer import model as model_lib
  g = npz_format.load_graph(graph_path)
  ex = list(examples.graph_examples(g, f"{kind}:x:g", 4, "valid", hops=1))
  graph = input_fn.model_input(kind, np.array(ex[:2], dtype=object), join)
  stats = model_lib.FeatureStats(np.zeros(140, np.float32),
                                 np.ones(140, np.float32),
                                 np.zeros(24, np.float32),
                                 np.ones(24, np.float32))
  sm = model_lib.build_score_model(
      hparams.ModelConfig(kind=kind, join=join),
      graph.spec.relax(num_components=True, num_nodes=True, num_edges=True),
      stats)
  return export.save(sm, kind, os.path.join(base, "tpurank", "1"), {}, join)


TRAIN_STEPS = 6
# Timed rankings after the warm-up (the median is reported): 5 of the 1k
# configs, 1 of the 100k (19 s long, so a call's swing matters less).
REPEATS = 5
LATE_KS = (16, 64, 128)  # Configs per example the late join trains with.


def train_speed(args) -> dict:
  """(child) configs/s of a few training steps on one graph."""
  # pylint: disable=g-import-not-at-top
  import tensorflow as tf
  from conversion import examples
  from conversion import options
  from schemas import npz_format
  from trainer import hparams
  from trainer import train as train_lib
  work = args.work
  records = os.path.join(work, f"train-{args.k}.tfrecord.gz")
  g = npz_format.load_graph(args.graph)
  with tf.io.TFRecordWriter(records, options="GZIP") as w:
    for e in examples.graph_examples(g, "layout:xla:random:g", args.k,
                                      "train", hops=options.DEFAULT_HOPS,
                                      max_examples=2 * TRAIN_STEPS * 4):
      w.write(e)
  cfg = hparams.TrainConfig(
      collection="layout:xla:random", train_files=[records],
      valid_files=[records], out_dir=os.path.join(
          work, f"run-{args.join}-{args.k}"), epochs=2,
      steps_per_epoch=TRAIN_STEPS, max_minutes=60, verbose=0, export=False,
      k=args.k, model=hparams.ModelConfig(kind="layout", join=args.join))
  summary = train_lib.train(cfg)
  return {"configs_per_s": summary["examples_per_second"] * args.k,
          "step_s": summary["step_seconds"] / summary["timed_steps"],
          "peak_rss_mb": _peak_rss_mb()}


def _peak_rss_mb() -> float:
  with open("/proc/self/status") as f:
    for line in f:
      if line.startswith("VmHWM:"):
        return int(line.split()[1]) / 1024
  return float("nan")


def measure(args) -> dict:
  """(child) Ranks one graph with one model (in-process, REST or gRPC): a
  warm-up, then `args.repeats` timed calls."""
  # pylint: disable=g-import-not-at-top
  import numpy as np
  from conversion import options
  from conversion import prune
  from schemas import npz_format
  from serving import client
  from serving import saved_model_scorer
  if args.server:
    c = client.connect(args.server)

    def score():  # As `tpurank rank --server`: the `rank` signature.
      sub = prune.prune(npz_format.load_graph(args.graph,
                                              config_values=False),
                        options.DEFAULT_HOPS)
      return saved_model_scorer.score_graph_arrays(
          c.rank, sub, client.configs_per_request(sub))
  else:
    scorer = saved_model_scorer.SavedModelScorer(args.model)
    score = lambda: scorer.score_graph(npz_format.load_graph(
        args.graph, config_values=False), "x:g")
  score()  # Warm-up: tracing, first allocation.
  times = []
  for _ in range(args.repeats):
    start = time.perf_counter()
    scores = score()
    times.append(time.perf_counter() - start)
  # The median: one call on 2 shared cores swings by 20-50%.
  return {"seconds": float(np.median(times)), "first_s": times[0],
          "times": times, "configs": len(scores),
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
  parser.add_argument("--train-nodes", type=int, default=44000)
  parser.add_argument("--report", default="benchmarks/results/join.md")
  parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--graph", help=argparse.SUPPRESS)
  parser.add_argument("--model", help=argparse.SUPPRESS)
  parser.add_argument("--server", help=argparse.SUPPRESS)
  parser.add_argument("--train", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--join", help=argparse.SUPPRESS)
  parser.add_argument("--k", type=int, help=argparse.SUPPRESS)
  parser.add_argument("--work", help=argparse.SUPPRESS)
  parser.add_argument("--repeats", type=int, default=REPEATS,
                      help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    print(json.dumps(train_speed(args) if args.train else measure(args)))
    return
  # pylint: disable=g-import-not-at-top
  import numpy as np
  from schemas import npz_format
  from simulator import synth
  rows = []
  with tempfile.TemporaryDirectory() as tmp:
    graphs = {}
    for name, nodes, configs in (("mid", args.nodes, args.configs),
                                 ("big", args.big_nodes, args.big_configs),
                                 ("train", args.train_nodes, 2000)):
      graphs[name] = os.path.join(tmp, f"{name}.npz")
      n, c = synth.write_layout_graph(
          graphs[name], np.random.default_rng(0), synth.SCALES["full"], "xla",
          "random", nodes=nodes, configs=configs)
      graphs[name + "_desc"] = f"{n} nodes, {c} configs"
    tile_graph = os.path.join(tmp, "tile.npz")
    for seed in range(100):  # A kernel with many configs.
      synth.write_tile_graph(tile_graph, np.random.default_rng(seed),
                             synth.SCALES["full"])
      tg = npz_format.load_graph(tile_graph)
      if tg.num_configs >= 500:
        break
    model = make_model(tile_graph, os.path.join(tmp, "tile"), "late", "tile")
    r = _child("--graph", tile_graph, "--model", model)
    tile = {"graph": f"{tg.num_nodes} nodes, {tg.num_configs} configs",
            "rank_s": r["seconds"], "rank_rss_mb": r["peak_rss_mb"]}
    print(json.dumps(tile), flush=True)
    for join in JOINS:
      base = os.path.join(tmp, join)
      model = make_model(graphs["mid"], base, join)
      row = {"join": join}
      r = _child("--graph", graphs["mid"], "--model", model)
      row["rank_s"], row["rank_rss_mb"] = r["seconds"], r["peak_rss_mb"]
      row["rank_times"] = r["times"]
      server = subprocess.Popen(
          [sys.executable, "-m", "tpurank.cli", "serve", "--model-base",
           base, "--port", "0", "--grpc-port", "0"], cwd=ROOT,
          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
      try:
        info = json.loads(server.stdout.readline())
        for name in ("rest", "grpc"):
          r = _child("--graph", graphs["mid"], "--server", info[name])
          row[f"{name}_s"], row[f"{name}_times"] = r["seconds"], r["times"]
      finally:
        server.terminate()
        server.wait()
      r = _child("--graph", graphs["big"], "--model", model, "--repeats",
                 "1")
      row["big_s"], row["big_rss_mb"] = r["seconds"], r["peak_rss_mb"]
      for k in LATE_KS if join == "late" else LATE_KS[:1]:
        r = _child("--train", "--graph", graphs["train"], "--join", join,
                   "--k", str(k), "--work", tmp)
        row[f"train_k{k}"] = r
      rows.append(row)
      print(json.dumps(row), flush=True)
  cmd = (f"python -m benchmarks.bench_join --nodes {args.nodes} --configs "
         f"{args.configs} --big-nodes {args.big_nodes} --big-configs "
         f"{args.big_configs} --train-nodes {args.train_nodes}")
  lines = [
      "# Late vs early join: layout ranking speed and memory", "",
      "SIMULATED graphs (`tpurank synth`), untrained default-architecture "
      "models (speed does not depend on the weights); 2 CPU cores; each "
      f"ranking figure is the median of {REPEATS} calls after one warm-up "
      "(the bulk one: 1 call), in its own process; the first call after "
      "the warm-up is in the JSON (`first_s`).", "",
      f"Command: `{cmd}`  ", f"Date: {time.strftime('%Y-%m-%d %H:%M')}  ",
      f"Graphs: {graphs['mid_desc']} (rank, REST); {graphs['big_desc']} "
      "(bulk).", "",
      "| join | rank in-process (s) | peak RSS (MB) | rank via REST (s) | "
      "rank via gRPC (s) | bulk in-process (s) | bulk configs/s | "
      "bulk peak RSS (MB) |",
      "|---|---|---|---|---|---|---|---|"]
  for r in rows:
    lines.append(
        f"| {r['join']} | {r['rank_s']:.2f} | {r['rank_rss_mb']:.0f} | "
        f"{r['rest_s']:.2f} | {r['grpc_s']:.2f} | {r['big_s']:.1f} | "
        f"{args.big_configs / r['big_s']:.0f} | {r['big_rss_mb']:.0f} |")
  lines += ["", f"Training on {graphs['train_desc']} (batch 4 graphs x K "
            "configs, each join's default: early with XLA and padding, late "
            "without XLA on CPU):", "",
            "| join | K | configs/s | s/step | peak RSS (MB) |",
            "|---|---|---|---|---|"]
  for r in rows:
    for k in LATE_KS:
      t = r.get(f"train_k{k}")
      if t:
        lines.append(f"| {r['join']} | {k} | {t['configs_per_s']:.1f} | "
                     f"{t['step_s']:.2f} | {t['peak_rss_mb']:.0f} |")
  lines += ["", f"Tile model, rank in-process: {tile['graph']} in "
            f"{tile['rank_s']:.3f} s (peak RSS {tile['rank_rss_mb']:.0f} MB)."]
  report.write_report(args.report, lines)
  report.write_json(args.report, {"command": cmd, "rows": rows,
                                  "tile": tile})


if __name__ == "__main__":
  main()
