"""Training examples/s on 1 worker vs 2 (MultiWorkerMirroredStrategy).

  python -m benchmarks.bench_multi_worker [--collection layout:xla:random]
      [--graphs 8] [--epochs 3] [--steps-per-epoch 10]

Trains the same model (`tpurank train`, hidden 32, 2 layers, no XLA on
either side: XLA has no CPU kernels for the cross-worker collectives) on the
same SIMULATED collection with the same global batch, once as one process
and once as 2 worker processes on localhost ports (TF_CONFIG), one after the
other, and reads examples/s of the train steps alone from each chief's
summary.json (`train.ThroughputCallback`: validation and the first, tracing
step excluded). On one machine the 2 workers share its cores and talk over
loopback: this measures the overhead of the all-reduce and of two processes,
not what 2 machines would gain. The report (benchmarks/results/
multi_worker.md + .json) gives the command.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from benchmarks import report
from trainer import distribute

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def train_examples_per_second(data: str, collection: str, out: str,
                              workers: int, epochs: int, steps: int) -> dict:
  """Trains with `workers` local processes; the chief's summary.json."""
  cmd = [sys.executable, "-m", "tpurank.cli", "train", "--collection",
         collection, "--data", data, "--out", out, "--hidden", "32",
         "--layers", "2", "--epochs", str(epochs), "--steps-per-epoch",
         str(steps), "--patience", str(epochs), "--no-xla", "--no-export"]
  env = dict(os.environ, PYTHONPATH=ROOT)
  env.pop("TF_CONFIG", None)
  if workers == 1:
    configs = [None]
  else:
    cmd.append("--multi-worker")
    configs = distribute.localhost_tf_configs(workers)
  start = time.time()
  procs = []
  for i, config in enumerate(configs):
    proc_env = dict(env, TF_CONFIG=config) if config else env
    procs.append(subprocess.Popen(
        cmd, cwd=ROOT, env=proc_env, stdout=open(f"{out}.w{i}.log", "w"),
        stderr=subprocess.STDOUT))
  for i, p in enumerate(procs):
    if p.wait() != 0:
      raise RuntimeError(f"worker {i} failed: see {out}.w{i}.log")
  with open(os.path.join(out, "summary.json")) as f:
    summary = json.load(f)
  return {"workers": workers, "wall_s": time.time() - start,
          **{k: summary.get(k) for k in (
              "examples_per_second", "timed_steps", "step_seconds",
              "replicas", "steps_per_epoch", "train_examples")}}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--collection", default="layout:xla:random")
  parser.add_argument("--graphs", type=int, default=8)
  parser.add_argument("--epochs", type=int, default=3)
  parser.add_argument("--steps-per-epoch", type=int, default=10)
  parser.add_argument("--report",
                      default="benchmarks/results/multi_worker.md")
  args = parser.parse_args()
  # pylint: disable=g-import-not-at-top
  from simulator import synth
  cmd = (f"python -m benchmarks.bench_multi_worker --collection "
         f"{args.collection} --graphs {args.graphs} --epochs {args.epochs} "
         f"--steps-per-epoch {args.steps_per_epoch}")
  rows = []
  with tempfile.TemporaryDirectory() as tmp:
    data = os.path.join(tmp, "data")
    synth.synth_collection(args.collection, data, graphs=args.graphs, seed=0,
                           scale="tiny", progress=False)
    for workers in (1, 2):
      row = train_examples_per_second(
          data, args.collection, os.path.join(tmp, f"run{workers}"), workers,
          args.epochs, args.steps_per_epoch)
      rows.append(row)
      print(json.dumps(row), flush=True)
  one = rows[0]["examples_per_second"]
  lines = [
      "# Multi-worker training: examples/s on 1 vs 2 workers", "",
      "SIMULATED data (`tpurank synth`, tiny scale); both runs on this "
      f"machine ({os.cpu_count()} CPU cores), one after the other; the same "
      "global batch, no XLA. The 2 workers share the same cores and talk "
      "over loopback: the ratio shows the cost of the all-reduce and of a "
      "second process here, not the speed-up of 2 machines.", "",
      f"Command: `{cmd}`  ", f"Date: {time.strftime('%Y-%m-%d %H:%M')}", "",
      "| workers | train examples/s | ratio to 1 worker | timed steps | "
      "wall s (incl. start-up, validation) |", "|---|---|---|---|---|"]
  for r in rows:
    eps = r["examples_per_second"]
    lines.append(f"| {r['workers']} | {eps:.1f} | "
                 f"{eps / one:.2f} | {r['timed_steps']} | "
                 f"{r['wall_s']:.0f} |")
  report.write_report(args.report, lines)
  report.write_json(args.report, {"command": cmd, "rows": rows})


if __name__ == "__main__":
  main()
