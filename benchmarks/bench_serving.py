"""Benchmark of serving and scoring: latency, throughput, configs/s.

Usage:
  python -m benchmarks.bench_serving [--nodes 2000] [--configs 1000]
      [--clients 1 4] [--seconds 5] [--min-rankings 100] [--report FILE]

One simulated layout graph and an untrained model of the default
architecture and join (weights do not change the cost), exported as
training exports it. A "ranking" is one client scoring all of the graph's
configs as `tpurank rank` does: the graph pruned once with the default
hops, then the plain-tensor `rank` signature in requests of as many configs
as the call budget and request size allow (in-process: the same signature).
Each concurrency level runs for --seconds and at least --min-rankings
rankings, so p99 rests on that many samples; reported: ranking latency
p50/p99, rankings/s and configs/s, over REST and gRPC against
`tpurank serve` started as a subprocess (with its default memory bounds)
and its peak RSS, beside the in-process SavedModel at one client (the
bound), and batch scoring (`tpurank score`'s Beam job) of a small simulated
collection.
"""

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

from benchmarks import report
from trainer import hparams

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_model(graph_path: str, base: str) -> str:
  """Exports a default-architecture, default-join layout model under
  base/tpurank/1."""
  # pylint: disable=g-import-not-at-top
  from conversion import examples
  from conversion import options
  from schemas import npz_format
  from trainer import export
  from trainer import input_fn
  from trainer import model as model_lib
  cfg = hparams.ModelConfig(kind="layout")
  g = npz_format.load_graph(graph_path)
  ex = list(examples.graph_examples(g, "layout:x:g", 16, "valid",
                                    hops=options.DEFAULT_HOPS))
  graph = input_fn.model_input("layout", np.array(ex[:2], dtype=object),
                               cfg.join)
  stats = model_lib.FeatureStats(np.zeros(140, np.float32),
                                 np.ones(140, np.float32),
                                 np.zeros(24, np.float32),
                                 np.ones(24, np.float32))
  sm = model_lib.build_score_model(
      cfg, graph.spec.relax(num_components=True, num_nodes=True,
                            num_edges=True), stats)
  return export.save(sm, "layout", os.path.join(base, "tpurank", "1"),
                     {"hops": options.DEFAULT_HOPS}, cfg.join)


def peak_rss_mb(pid: int) -> float:
  """Peak resident memory (VmHWM) of a live process, in MB."""
  with open(f"/proc/{pid}/status") as f:
    for line in f:
      if line.startswith("VmHWM:"):
        return int(line.split()[1]) / 1024
  return float("nan")


def load_level(rank_once, clients: int, seconds: float,
               min_rankings: int) -> dict:
  """Rankings by `clients` concurrent clients for `seconds`, and until at
  least `min_rankings` are done."""
  latencies = []
  lock = threading.Lock()
  deadline = time.perf_counter() + seconds

  def one_client():
    while True:
      with lock:
        if time.perf_counter() >= deadline and len(latencies) >= min_rankings:
          return
      start = time.perf_counter()
      rank_once()
      with lock:
        latencies.append(time.perf_counter() - start)

  start = time.perf_counter()
  with concurrent.futures.ThreadPoolExecutor(clients) as pool:
    list(pool.map(lambda _: one_client(), range(clients)))
  wall = time.perf_counter() - start
  lat = np.array(latencies) * 1000
  return {"clients": clients, "rankings": len(lat),
          "p50_ms": float(np.percentile(lat, 50)),
          "p99_ms": float(np.percentile(lat, 99)),
          "rankings_per_s": len(lat) / wall}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--nodes", type=int, default=2000)
  parser.add_argument("--configs", type=int, default=1000)
  parser.add_argument("--clients", type=int, nargs="+", default=[1, 4])
  parser.add_argument("--seconds", type=float, default=5.0)
  parser.add_argument("--min-rankings", type=int, default=100)
  parser.add_argument("--report", default="benchmarks/results/serving.md")
  args = parser.parse_args()
  # pylint: disable=g-import-not-at-top
  from conversion import options
  from conversion import prune
  from schemas import npz_format
  from serving import client
  from serving import saved_model_scorer
  from serving import score_job
  from simulator import synth
  rows, extra = [], {}
  with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "g.npz")
    nodes, configs = synth.write_layout_graph(
        path, np.random.default_rng(0), synth.SCALES["full"], "xla", "random",
        nodes=args.nodes, configs=args.configs)
    extra["graph"] = f"{nodes} nodes, {configs} configs"
    model = make_model(path, os.path.join(tmp, "models"))
    g = npz_format.load_graph(path)
    start = time.perf_counter()
    sub = prune.prune(g, options.DEFAULT_HOPS)
    extra["build_ms"] = (time.perf_counter() - start) * 1000
    chunk = client.configs_per_request(sub)
    extra["requests"] = (f"pruned to {sub.num_nodes} nodes; requests of <= "
                         f"{chunk} configs")
    # The server first: this process stays small meanwhile (the
    # in-process scorer's activations would stay resident in it).
    server = subprocess.Popen(
        [sys.executable, "-m", "tpurank.cli", "serve", "--model-base",
         os.path.join(tmp, "models"), "--port", "0", "--grpc-port", "0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True)
    try:
      info = json.loads(server.stdout.readline())
      for name, url in (("REST (tpurank serve)", info["rest"]),
                        ("gRPC (tpurank serve)", info["grpc"])):
        # One client object shared by the threads: urllib opens a
        # connection per request, a gRPC channel multiplexes them.
        c = client.connect(url)
        rank_once = lambda c=c: saved_model_scorer.score_graph_arrays(
            c.rank, sub, chunk)
        rank_once()  # Warm-up.
        for n in args.clients:
          rows.append({"path": name, **load_level(
              rank_once, n, args.seconds, args.min_rankings)})
          rows[-1]["server_peak_rss_mb"] = peak_rss_mb(server.pid)
          print(json.dumps(rows[-1]), flush=True)
    finally:
      server.terminate()
      server.wait()
    # The bound: the same SavedModel in this process, one caller (more
    # callers only share the same 2 cores).
    local = saved_model_scorer.SavedModelScorer(model)
    local.score_graph(g, "x:g")  # Warm-up (tracing).
    rows.append({"path": "in-process SavedModel", **load_level(
        lambda: local.score_graph(g, "x:g"), 1, args.seconds,
        args.min_rankings)})
    print(json.dumps(rows[-1]), flush=True)
    data = os.path.join(tmp, "data")
    coll = "layout:xla:random"
    synth.synth_collection(coll, data, seed=0, scale="small", progress=False)
    valid = score_job.find_collections(data, "valid")[coll]
    n_configs = sum(npz_format.load_graph(f).num_configs for f in valid)
    start = time.perf_counter()
    summary = score_job.run([model], data, os.path.join(tmp, "sub.csv"),
                            coll, "valid")
    seconds = time.perf_counter() - start
    extra["batch"] = {"graphs": summary["rows"], "configs": n_configs,
                      "seconds": seconds, "configs_per_s": n_configs / seconds}
  _write(args, rows, extra)


def _write(args, rows, extra):
  lines = ["# Serving and batch scoring", "",
           f"Command: `python -m benchmarks.bench_serving --nodes "
           f"{args.nodes} --configs {args.configs} --clients "
           f"{' '.join(map(str, args.clients))} --seconds {args.seconds:g} "
           f"--min-rankings {args.min_rankings}`  ",
           f"Date: {time.strftime('%Y-%m-%d %H:%M')}; 2 CPU cores (server "
           "and clients share them); simulated graph "
           f"({extra['graph']}); untrained model of the default "
           "architecture and join (weights do not change the cost). A "
           "ranking = all configs of the graph through the `rank` "
           f"signature, as `tpurank rank` sends them: {extra['requests']}. "
           f"Pruning the graph (client side, once): "
           f"{extra['build_ms']:.0f} ms. Each row runs for at least "
           f"{args.seconds:g} s and {args.min_rankings} rankings: p99 is the "
           "99th percentile of at least that many latencies.", "",
           "| path | concurrent clients | rankings | p50 ms | p99 ms | "
           "rankings/s | configs/s | server peak RSS MB (so far) |",
           "|---|---|---|---|---|---|---|---|"]
  n = args.configs
  for r in rows:
    lines.append(f"| {r['path']} | {r['clients']} | {r['rankings']} | "
                 f"{r['p50_ms']:.0f} | {r['p99_ms']:.0f} | "
                 f"{r['rankings_per_s']:.2f} | "
                 f"{r['rankings_per_s'] * n:.0f} | "
                 f"{r.get('server_peak_rss_mb', float('nan')):.0f} |")
  b = extra["batch"]
  lines += ["", f"Batch scoring (`tpurank score`, Beam RunInference, "
            "DirectRunner over 2 cores, including pipeline start-up): "
            f"{b['graphs']} graphs, {b['configs']} configs of the valid split "
            f"of a small simulated layout:xla:random collection in "
            f"{b['seconds']:.1f} s = {b['configs_per_s']:.0f} configs/s."]
  lines += ["", "The server runs with its defaults: at most 2 predictions at "
            "once (the rest wait, then get 429 and the client retries), so "
            "its memory stays bounded however many clients call it."]
  report.write_report(args.report, lines)
  report.write_json(args.report, {"rows": rows, **extra,
                                  "configs": args.configs,
                                  "nodes": args.nodes})


if __name__ == "__main__":
  main()
