"""Scores every config of every graph in a set of records, then the metrics."""

import collections
from typing import Sequence

import numpy as np
import tensorflow as tf

from trainer import input_fn
from trainer import metrics


def predict_records(score_model: tf.keras.Model, kind: str,
                    files: Sequence[str], batch_size: int = 8) -> dict:
  """Runs the model over records; groups configs by graph.

  Returns:
    {graph_id: {"index", "score", "runtime", "normalizer"}} with arrays
    sorted by config index; score: higher = predicted faster.
  """

  @tf.function(reduce_retracing=True)
  def step(serialized):
    graph = input_fn.parse_batch(kind, serialized)
    out = score_model(input_fn.graph_ops.expand(kind, graph), training=False)
    config = graph.node_sets["config"]
    gid = tf.repeat(graph.context["graph_id"], config.sizes)
    normalizer = (config["normalizer"] if kind == "tile"
                  else tf.ones_like(config["runtime"]))
    return gid, config["index"], out["scores"], config["runtime"], normalizer

  parts = collections.defaultdict(lambda: collections.defaultdict(list))
  for serialized in input_fn.read_records(files).batch(batch_size):
    for name, value in zip(("gid", "index", "score", "runtime", "normalizer"),
                           step(serialized)):
      parts["_"][name].append(value.numpy())
  if not parts:
    return {}
  flat = {k: np.concatenate(v) for k, v in parts["_"].items()}
  result = {}
  gids = flat.pop("gid")
  for gid in np.unique(gids):
    sel = gids == gid
    order = np.argsort(flat["index"][sel], kind="stable")
    result[gid.decode()] = {k: v[sel][order] for k, v in flat.items()}
  return result


def evaluate(score_model: tf.keras.Model, kind: str, files: Sequence[str],
             batch_size: int = 8) -> tuple[dict, dict]:
  """Ranking metrics over all configs of each graph with runtimes.

  Returns:
    (collection means, {graph_id: that graph's metrics}).
  """
  per_graph = {}
  for gid, g in predict_records(score_model, kind, files, batch_size).items():
    if not np.any(g["runtime"] > 0):
      continue  # Test split: no runtimes to compare with.
    per_graph[gid] = metrics.graph_metrics(
        kind, -g["score"], g["runtime"].astype(np.float64),
        g["normalizer"].astype(np.float64))
  return metrics.collection_metrics(kind, per_graph.values()), per_graph
