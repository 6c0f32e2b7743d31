"""Scaling benchmark: time and peak memory vs graph size and config count.

Usage:
  python -m benchmarks.bench_scaling [--nodes 1000 2500 ... 44000]
      [--configs 1000 3000 ... 100000] [--fixed-configs 1000]
      [--fixed-nodes 1000] [--report FILE]

Two sweeps of SIMULATED layout:xla:random graphs (the largest kind): graph
size at a fixed config count, and config count at a fixed graph size. Each
point runs three stages, each in its own process so that its peak RSS is its
own (os.wait4):

* convert: every config of the graph into examples of K=128, as the
  valid/test conversion does (the Beam job runs this per graph), beside a
  bare `np.load` of every array of the same file (its bound);
* train: the graph's train examples (merged, shuffled, capped as
  `tpurank train` makes them), then a few XLA-compiled train steps of the
  default model: seconds per step and examples/s, beside the input pipeline
  alone (read, parse, expand, pad) as its bound;
* score: every config through the exported SavedModel in chunks (the
  serving signature), configs/s.

The report gives the log-log slope between neighbouring points (1 = linear;
clearly above 1 = faster than linear) and plots both sweeps.
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
from conversion import options
from trainer import hparams

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STAGES = ("convert", "train", "score")
TRAIN_STEPS = 4  # Per epoch; two epochs, the first step (compile) untimed.


def _stage(stage: str, graph: str, work: str) -> dict:
  """Runs one stage in this process; returns its measurements."""
  # pylint: disable=g-import-not-at-top
  from conversion import examples
  from schemas import npz_format
  gid = "layout:xla:random:g"
  if stage == "convert":
    start = time.perf_counter()
    with np.load(graph) as z:
      for name in z.files:
        z[name]  # pylint: disable=pointless-statement
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    g = npz_format.load_graph(graph)
    out_bytes = sum(len(e) for e in examples.graph_examples(
        g, gid, 128, "test", hops=options.DEFAULT_HOPS))
    return {"seconds": time.perf_counter() - start, "np_load_seconds": load_s,
            "out_mb": out_bytes / 2**20}
  if stage == "train":
    import tensorflow as tf
    from trainer import input_fn
    from trainer import train as train_lib
    records = os.path.join(work, "train.tfrecord.gz")
    valid = os.path.join(work, "valid.tfrecord.gz")
    g = npz_format.load_graph(graph)
    with tf.io.TFRecordWriter(records, options="GZIP") as w, \
        tf.io.TFRecordWriter(valid, options="GZIP") as v:
      for i, e in enumerate(examples.graph_examples(
          g, gid, 16, "train", hops=options.DEFAULT_HOPS, max_examples=24)):
        w.write(e)
        if i == 0:  # Validation is not measured here: one example.
          v.write(e)
    cfg = hparams.TrainConfig(
        collection="layout:xla:random", train_files=[records],
        valid_files=[valid], out_dir=os.path.join(work, "run"), epochs=2,
        steps_per_epoch=TRAIN_STEPS, max_minutes=60, verbose=0,
        export_path=os.path.join(work, "export", "1"),
        hops=options.DEFAULT_HOPS)
    _, biggest = input_fn.scan_examples([records], "layout", cfg.k)
    ds = input_fn.train_dataset(
        [records], "layout", cfg.batch_size, cfg.k, seed=0,
        size_constraints=input_fn.constraints_for(biggest, cfg.batch_size))
    it = iter(ds)
    next(it)
    start = time.perf_counter()
    for _ in range(2 * TRAIN_STEPS):
      next(it)
    input_eps = 2 * TRAIN_STEPS * cfg.batch_size / (time.perf_counter() -
                                                    start)
    summary = train_lib.train(cfg)
    return {"seconds": summary["step_seconds"] / summary["timed_steps"],
            "examples_per_second": summary["examples_per_second"],
            "input_examples_per_second": input_eps,
            "model": summary["export"]}
  if stage == "score":
    from serving import saved_model_scorer
    model = os.path.join(work, "export", "1")
    g = npz_format.load_graph(graph)
    scorer = saved_model_scorer.SavedModelScorer(model)
    start = time.perf_counter()
    scores = scorer.score_graph(g, gid)
    seconds = time.perf_counter() - start
    assert len(scores) == g.num_configs
    return {"seconds": seconds, "configs_per_second": g.num_configs / seconds}
  raise ValueError(stage)


def run_stage(stage: str, graph: str, work: str) -> dict:
  """`_stage` in a child process; adds its wall time and peak RSS (MB)."""
  start = time.perf_counter()
  proc = subprocess.Popen(
      [sys.executable, "-m", "benchmarks.bench_scaling", "--stage", stage,
       "--graph", graph, "--work", work], cwd=ROOT, stdout=subprocess.PIPE,
      stderr=subprocess.DEVNULL, text=True)
  out = proc.stdout.read()
  _, status, usage = os.wait4(proc.pid, 0)
  proc.returncode = os.waitstatus_to_exitcode(status)
  if proc.returncode != 0:
    raise RuntimeError(f"stage {stage} on {graph} failed ({proc.returncode})")
  result = json.loads(out.strip().splitlines()[-1])
  result["wall_seconds"] = time.perf_counter() - start
  result["peak_rss_mb"] = usage.ru_maxrss / 1024
  return result


def measure_point(tmp: str, nodes: int, configs: int) -> dict:
  """Synthesizes one graph and runs every stage on it."""
  # pylint: disable=g-import-not-at-top
  from simulator import synth
  work = os.path.join(tmp, f"n{nodes}-c{configs}")
  os.makedirs(work)
  graph = os.path.join(work, "g.npz")
  real_nodes, real_configs = synth.write_layout_graph(
      graph, np.random.default_rng(nodes + configs), synth.SCALES["full"],
      "xla", "random", nodes=nodes, configs=configs)
  point = {"nodes": real_nodes, "configs": real_configs,
           "npz_mb": os.path.getsize(graph) / 2**20}
  for stage in STAGES:
    point[stage] = run_stage(stage, graph, work)
  print(json.dumps(point), flush=True)
  return point


def slopes(xs, ys) -> list:
  """Log-log slope between neighbouring points (1 = linear growth)."""
  return [float(np.log(ys[i + 1] / ys[i]) / np.log(xs[i + 1] / xs[i]))
          if ys[i] > 0 and ys[i + 1] > 0 and xs[i + 1] != xs[i] else None
          for i in range(len(xs) - 1)]


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--nodes", type=int, nargs="+",
                      default=[1000, 2500, 5000, 10000, 20000, 44000])
  parser.add_argument("--configs", type=int, nargs="+",
                      default=[1000, 3000, 10000, 30000, 100000])
  parser.add_argument("--fixed-configs", type=int, default=1000)
  parser.add_argument("--fixed-nodes", type=int, default=1000)
  parser.add_argument("--report", default="benchmarks/results/scaling.md")
  parser.add_argument("--stage", choices=STAGES, help=argparse.SUPPRESS)
  parser.add_argument("--graph", help=argparse.SUPPRESS)
  parser.add_argument("--work", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.stage:
    print(json.dumps(_stage(args.stage, args.graph, args.work)))
    return
  done = {}  # The sweeps may share a point: measured once.

  def point(tmp, nodes, configs):
    if (nodes, configs) not in done:
      done[nodes, configs] = measure_point(tmp, nodes, configs)
    return done[nodes, configs]

  with tempfile.TemporaryDirectory() as tmp:
    by_nodes = [point(tmp, n, args.fixed_configs) for n in args.nodes]
    by_configs = [point(tmp, args.fixed_nodes, c) for c in args.configs]
  _write(args, by_nodes, by_configs)


def _write(args, by_nodes, by_configs):
  # pylint: disable=g-import-not-at-top
  from benchmarks import plots
  lines = ["# Scaling: time and peak RSS vs graph size and config count", "",
           "Command: `python -m benchmarks.bench_scaling --nodes "
           f"{' '.join(map(str, args.nodes))} --configs "
           f"{' '.join(map(str, args.configs))} --fixed-configs "
           f"{args.fixed_configs} --fixed-nodes {args.fixed_nodes}`  ",
           f"Date: {time.strftime('%Y-%m-%d %H:%M')}; 2 CPU cores; SIMULATED "
           "layout:xla:random graphs. Stages (each its own process, peak RSS "
           "its own): convert = every config into examples of K=128 (the "
           "valid/test conversion), bound: np.load of the same file; train = "
           f"one XLA train step of the default model (batch 4 x K=16; mean of "
           f"{2 * TRAIN_STEPS - 1} steps after the compiling one), bound: the "
           "input pipeline alone; score = every config through the "
           "SavedModel (chunks of 64 configs, 4 per call). Slope = log-log "
           "slope from the previous point (1 = linear).", ""]
  for title, points, axis in (("vs graph size", by_nodes, "nodes"),
                              ("vs config count", by_configs, "configs")):
    lines += [f"## {title}", "",
              "| nodes | configs | npz MB | convert s (slope) | np.load s | "
              "convert RSS MB | train s/step (slope) | train ex/s / input "
              "ex/s | train RSS MB | score s (slope) | configs/s | score RSS "
              "MB |", "|---|" * 1 + "---|" * 11]
    xs = [p[axis] for p in points]
    sl = {s: [None] + slopes(xs, [p[s]["seconds"] for p in points])
          for s in STAGES}
    fmt = lambda v: "" if v is None else f" ({v:.2f})"
    for i, p in enumerate(points):
      c, t, s = p["convert"], p["train"], p["score"]
      lines.append(
          f"| {p['nodes']} | {p['configs']} | {p['npz_mb']:.1f} | "
          f"{c['seconds']:.2f}{fmt(sl['convert'][i])} | "
          f"{c['np_load_seconds']:.2f} | {c['peak_rss_mb']:.0f} | "
          f"{t['seconds']:.2f}{fmt(sl['train'][i])} | "
          f"{t['examples_per_second']:.1f} / "
          f"{t['input_examples_per_second']:.1f} | {t['peak_rss_mb']:.0f} | "
          f"{s['seconds']:.1f}{fmt(sl['score'][i])} | "
          f"{s['configs_per_second']:.0f} | {s['peak_rss_mb']:.0f} |")
    png = plots.scaling_plot(points, axis, os.path.join(
        os.path.dirname(args.report), f"scaling_{axis}.png"))
    lines += ["", f"![scaling {title}]({os.path.basename(png)})", ""]
  report.write_report(args.report, lines)
  report.write_json(args.report, {"by_nodes": by_nodes,
                                  "by_configs": by_configs})


if __name__ == "__main__":
  main()
