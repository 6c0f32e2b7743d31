"""`tpurank rank`: the best configs of one graph, by a trained model."""

import os

import numpy as np

from schemas import npz_format
from schemas.errors import fail


def add_parser(sub):
  p = sub.add_parser(
      "rank", help="rank the configs of one graph with a trained model",
      description="Scores every config of GRAPH (a TpuGraphs .npz) with an "
      "exported model and prints the best ones, with their measured "
      "runtimes when the file has them.")
  p.add_argument("--graph", required=True, help="a TpuGraphs .npz file")
  p.add_argument("--model", required=True,
                 help="SavedModel directory (e.g. OUT/export/1), or a base "
                 "directory of numbered versions (the newest is used)")
  p.add_argument("--top", type=int, default=5)
  p.add_argument("--collection", default=None,
                 help="collection name for the graph id (default: from path)")


def resolve_model_dir(path: str) -> str:
  """A version dir as given, or the newest numbered version under a base."""
  from trainer import export  # pylint: disable=g-import-not-at-top
  if os.path.exists(os.path.join(path, "saved_model.pb")):
    return path
  versions = export.versions(path)
  if not versions:
    raise fail(path, "model", "a SavedModel dir or numbered versions",
               "neither")
  return os.path.join(path, str(versions[-1]))


def run(args) -> int:
  from serving.saved_model_scorer import SavedModelScorer  # pylint: disable=g-import-not-at-top
  graph = npz_format.load_graph(args.graph)
  model_dir = resolve_model_dir(args.model)
  collection = args.collection or (
      "tile:xla" if graph.kind == "tile" else "layout")
  scores = SavedModelScorer(model_dir).score_graph(
      graph, npz_format.graph_id(collection, args.graph))
  order = np.argsort(scores, kind="stable")
  runtime = graph.config_runtime.astype(np.float64)
  if graph.kind == "tile":
    runtime = runtime / np.maximum(graph.config_runtime_normalizers, 1)
  print(f"{args.graph}: {graph.num_configs} configs, model {model_dir}")
  has = graph.has_runtimes
  true_rank = np.argsort(np.argsort(runtime, kind="stable"), kind="stable")
  header = f"{'rank':>4} {'config':>7} {'score':>10}"
  if has:
    header += f" {'runtime' if graph.kind == 'layout' else 'rt/default':>12}"
    header += f" {'true rank':>9}"
  print(header)
  for r, i in enumerate(order[:args.top], start=1):
    line = f"{r:4d} {i:7d} {scores[i]:10.4f}"
    if has:
      line += f" {runtime[i]:12.4g} {true_rank[i] + 1:9d}"
    print(line)
  if has:
    best = runtime.min()
    print(f"best measured: config {int(np.argmin(runtime))} ({best:.4g}); "
          f"best of the top {args.top}: {runtime[order[:args.top]].min():.4g}")
  return 0
