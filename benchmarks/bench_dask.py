"""Conversion on Beam's DaskRunner (1 and 2 workers) beside the DirectRunner.

Usage:
  python -m benchmarks.bench_dask [--collections C ...] [--scale small]
      [--nodes 40000] [--configs 100000] [--no-full] [--workers 1 2]
      [--report FILE]

Inputs (SIMULATED, seed 0): the collections at `--scale` (`tpurank synth`;
every split), and one full-size layout graph (`--nodes` x `--configs`,
converted as a valid graph: every config) unless `--no-full`. Each input
is converted by `tpurank convert`'s job (`conversion/convert_job.py`) in a
fresh process, once per runner:

* DirectRunner: the command's default (multi-processing over all cores);
* Dask, N workers (`--workers`): a local dask.distributed cluster of N
  worker processes of one thread each, started by this benchmark for that
  one run (`--runner DaskRunner --dask_client_address ...`).

Wall seconds are the job's, from pipeline construction to the counts read
back (the Dask cluster's start is not in them; its workers' first import
of TensorFlow is, as the DirectRunner's worker start-up is). Peak RSS,
sampled every 0.1 s: the launching process, and the largest worker
(DirectRunner: the launcher's worker processes; Dask: the cluster's). Every run's counts must reconcile (`convert.reconcile`). The report
(benchmarks/results/dask.md + .json) starts with the command. On one
machine the Dask workers share its cores: 2 workers can gain at most what
its free cores allow, and nothing for a single graph (one task).
"""

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import psutil

from benchmarks import report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = r"""
import json, sys, time
args = json.loads(sys.argv[1])
from conversion import convert_job, options
start = time.perf_counter()
stats = convert_job.run(args["data"], args["collection"], args["out"],
                        options.ConvertOptions(**args["options"]),
                        args["beam_args"], args.get("splits"))
stats["seconds"] = time.perf_counter() - start
print(json.dumps(stats))
"""
# RSS is sampled this often (seconds) from outside: a process's own peak
# (getrusage) starts at its parent's when it is started (Linux keeps it
# across fork and exec), which would make every worker look as big as the
# process that started it.
SAMPLE_SECONDS = 0.1


# Inputs are made in a child process: this one stays small (its workers'
# and children's memory is what is measured).
_SYNTH = r"""
import json, os, sys
import numpy as np
from schemas import npz_format
from simulator import synth
args = json.loads(sys.argv[1])
if args["collection"]:
  synth.synth_collection(args["collection"], args["data"], seed=0,
                         scale=args["scale"], progress=False)
else:
  folder = npz_format.collection_dir(args["data"], "layout:xla:random",
                                     "valid")
  os.makedirs(folder)
  synth.write_layout_graph(os.path.join(folder, "big.npz"),
                           np.random.default_rng(0), synth.SCALES["full"],
                           "xla", "random", nodes=args["nodes"],
                           configs=args["configs"])
"""


def _synth(**args) -> None:
  subprocess.run([sys.executable, "-c", _SYNTH, json.dumps(args)],
                 check=True, cwd=ROOT)


class _PeakRss:
  """Peak RSS of a process (main) and of the largest of its descendants or
  of `extra` processes (workers), sampled every SAMPLE_SECONDS."""

  def __init__(self, pid: int, extra=()):
    self._main = psutil.Process(pid)
    self._extra = [psutil.Process(p) for p in extra]
    self.main_mb = self.worker_mb = 0.0
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._loop, daemon=True)
    self._thread.start()

  def _loop(self):
    while not self._stop.wait(SAMPLE_SECONDS):
      with contextlib.suppress(psutil.Error):
        self.main_mb = max(self.main_mb, self._main.memory_info().rss / 2**20)
        workers = self._main.children(recursive=True) + self._extra
        for w in workers:
          with contextlib.suppress(psutil.Error):
            self.worker_mb = max(self.worker_mb, w.memory_info().rss / 2**20)

  def stop(self):
    self._stop.set()
    self._thread.join()


def _worker_pid() -> int:
  return os.getpid()


def _convert(data, collection, out, options, beam_args, splits,
             workers=()) -> dict:
  """One conversion in a fresh process; its summary, seconds and RSS."""
  proc = subprocess.Popen(
      [sys.executable, "-c", _CHILD, json.dumps({
          "data": data, "collection": collection, "out": out,
          "options": options, "beam_args": list(beam_args),
          "splits": splits})],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
  rss = _PeakRss(proc.pid, workers)
  stdout, stderr = proc.communicate()
  rss.stop()
  if proc.returncode:
    raise RuntimeError(f"conversion of {data} failed:\n{stderr[-3000:]}")
  stats = json.loads(stdout.strip().splitlines()[-1])
  stats["rss_mb"], stats["worker_rss_mb"] = rss.main_mb, rss.worker_mb
  return stats


def measure(data, collection, out, options, runner: str, workers: int = 0,
            splits=None) -> dict:
  """Converts one input on `runner` ("direct" or "dask" with `workers`)."""
  import distributed  # pylint: disable=g-import-not-at-top
  cluster = None
  beam_args, pids = [], []
  try:
    if runner == "dask":
      # No memory limit: the DirectRunner has none either (a Dask nanny
      # would otherwise pause or restart a worker converting a big graph).
      cluster = distributed.LocalCluster(
          n_workers=workers, processes=True, threads_per_worker=1,
          host="127.0.0.1", dashboard_address=None, memory_limit=0)
      with distributed.Client(cluster) as client:
        pids = list(client.run(_worker_pid).values())
      beam_args = ["--runner", "DaskRunner", "--dask_client_address",
                   cluster.scheduler_address]
    conv = _convert(data, collection, out, options, beam_args, splits, pids)
  finally:
    if cluster is not None:
      cluster.close()
  splits_done = conv["splits"].values()
  return {"input": collection, "runner": runner, "workers": workers,
          "seconds": conv["seconds"],
          "graphs": sum(s["graphs_converted"] for s in splits_done),
          "configs": sum(s["configs"] for s in splits_done),
          "examples": sum(s["examples"] for s in splits_done),
          "rss_mb": conv["rss_mb"], "worker_rss_mb": conv["worker_rss_mb"],
          "mismatches": conv["mismatches"]}


def _runners(workers):
  return [("direct", 0)] + [("dask", w) for w in workers]


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--collections", nargs="+", default=None,
                      help="default: all five")
  parser.add_argument("--scale", default="small",
                      help="of the collections (`tpurank synth --scale`)")
  parser.add_argument("--nodes", type=int, default=40000,
                      help="nodes of the full-size layout graph")
  parser.add_argument("--configs", type=int, default=100000,
                      help="configs of the full-size layout graph")
  parser.add_argument("--no-full", action="store_true",
                      help="leave out the full-size graph")
  parser.add_argument("--workers", type=int, nargs="+", default=[1, 2],
                      help="Dask worker counts")
  parser.add_argument("--report", default="benchmarks/results/dask.md")
  args = parser.parse_args()
  # pylint: disable=g-import-not-at-top
  from conversion import options
  from schemas import npz_format
  cmd = "python -m benchmarks.bench_dask " + " ".join(sys.argv[1:])
  rows = []
  with tempfile.TemporaryDirectory() as tmp:
    inputs = []
    for c in args.collections or npz_format.COLLECTIONS:
      data = os.path.join(tmp, "data", c.replace(":", "_"))
      _synth(collection=c, data=data, scale=args.scale)
      inputs.append((c, c, data, None))
    if not args.no_full:
      c = "layout:xla:random"
      data = os.path.join(tmp, "full")
      _synth(collection=None, data=data, nodes=args.nodes,
             configs=args.configs)
      inputs.append((f"one layout graph ({args.nodes} nodes, "
                     f"{args.configs} configs, as valid)", c, data, ["valid"]))
    for i, (name, c, data, splits) in enumerate(inputs):
      # `tpurank convert`'s defaults.
      opts = vars(options.ConvertOptions(max_examples=options.max_examples(
          npz_format.collection_kind(c))))
      for runner, workers in _runners(args.workers):
        out = os.path.join(tmp, "out", f"{i}-{runner}{workers}")
        row = measure(data, c, out, opts, runner, workers, splits)
        row["input"] = name
        rows.append(row)
        print(json.dumps(row), flush=True)
  _write(args, cmd, rows)


def _label(r) -> str:
  return ("DirectRunner (all cores)" if r["runner"] == "direct" else
          f"Dask, {r['workers']} worker{'s' * (r['workers'] > 1)}")


def _write(args, cmd, rows):
  lines = [
      "# Conversion on Beam's DaskRunner vs the DirectRunner (SIMULATED "
      "data)", "", f"Command: `{cmd}`  ",
      f"Date: {time.strftime('%Y-%m-%d %H:%M')}; {os.cpu_count()} CPU "
      f"cores; collections from `tpurank synth --scale {args.scale} --seed "
      "0`; conversion options: `tpurank convert`'s defaults. "
      "DirectRunner: multi-processing over all "
      "cores (the default); Dask: a local dask.distributed cluster of N "
      "worker processes x 1 thread, one graph file per task. Wall seconds "
      "exclude starting the Dask cluster, include its workers' first "
      "import of TensorFlow. Peak RSS sampled every 0.1 s. On one machine the workers share its cores: "
      "this shows the DaskRunner's overhead and how 2 workers share "
      "them, not what 2 machines would gain.", "",
      "| input | runner | wall s | vs DirectRunner | graphs | configs | "
      "examples | peak RSS main / largest worker MB |",
      "|---|---|---|---|---|---|---|---|"]
  direct = {r["input"]: r["seconds"] for r in rows if r["runner"] == "direct"}
  for r in rows:
    lines.append(
        f"| {r['input']} | {_label(r)} | {r['seconds']:.1f} | "
        f"{direct[r['input']] / r['seconds']:.2f}x | {r['graphs']} | "
        f"{r['configs']} | {r['examples']} | {r['rss_mb']:.0f} / "
        f"{r['worker_rss_mb']:.0f} |")
  ws = sorted({r["workers"] for r in rows if r["runner"] == "dask"})
  if len(ws) > 1:
    lines += ["", f"Dask {ws[-1]} workers vs {ws[0]} (wall-time speed-up):",
              ""]
    by = {(r["input"], r["workers"]): r["seconds"] for r in rows
          if r["runner"] == "dask"}
    for name in direct:
      lines.append(f"- {name}: {by[(name, ws[0])] / by[(name, ws[-1])]:.2f}x")
  lines += ["", "Counts reconciled in every run (every input file converted "
            "or dead-lettered; graphs in = converted + dead letters)."
            if not any(r["mismatches"] for r in rows) else
            "COUNTS DID NOT RECONCILE: " + json.dumps(
                [r["mismatches"] for r in rows])]
  report.write_report(args.report, lines)
  report.write_json(args.report, {"command": cmd, "rows": rows})


if __name__ == "__main__":
  main()
