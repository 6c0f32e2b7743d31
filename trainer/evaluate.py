"""Scores every config of every graph in a set of records, then the metrics."""

import collections
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

from trainer import graph_ops
from trainer import hparams
from trainer import input_fn
from trainer import metrics


class RecordScorer:
  """Scores every config in record files, grouped by graph.

  The traced step is built once per model (validation calls it every epoch).

  Init args:
    score_model: The model.
    kind: "tile" or "layout".
    batch_size: Examples per step.
    join: The layout model's join (`hparams.JOINS`).
  """

  def __init__(self, score_model: tf.keras.Model, kind: str,
               batch_size: int = 8, join: str = hparams.JOINS[0]):
    self._kind, self._batch_size = kind, batch_size

    @tf.function(reduce_retracing=True, autograph=False)
    def step(serialized):
      graph = input_fn.parse_batch(kind, serialized)
      out = score_model(graph_ops.expand(kind, graph, join),
                        training=False)
      config = graph.node_sets["config"]
      gid = tf.repeat(graph.context["graph_id"], config.sizes)
      normalizer = (config["normalizer"] if kind == "tile"
                    else tf.ones_like(config["runtime"]))
      return gid, config["index"], out["scores"], config["runtime"], normalizer

    self._step = step

  def __call__(self, files: Sequence[str]) -> dict:
    """`score_records` of `files` with this model."""
    return score_records(files, self._batch_size,
                         lambda s: [v.numpy() for v in self._step(s)])


_FIELDS = ("gid", "index", "score", "runtime", "normalizer")


def score_records(files: Sequence[str], batch_size: int,
                  score_batch: Callable) -> dict:
  """Scores every config in record files and groups the scores by graph.

  Args:
    files: TFRecord files (GZIP or plain) as conversion writes them.
    batch_size: Examples per call of `score_batch`.
    score_batch: A batch of serialized examples -> flat per-config arrays
      (graph id, config index, score = higher is predicted faster,
      runtime, normalizer).

  Returns:
    {graph_id: {"index", "score", "runtime", "normalizer"}}, graphs in id
    order and each graph's configs in index order.
  """
  parts = collections.defaultdict(list)
  for serialized in input_fn.read_records(files).batch(batch_size):
    for name, value in zip(_FIELDS, score_batch(serialized)):
      parts[name].append(np.asarray(value))
  if not parts:
    return {}
  flat = {k: np.concatenate(v) for k, v in parts.items()}
  gids = flat.pop("gid")
  result = {}
  for gid in np.unique(gids):
    sel = gids == gid
    order = np.argsort(flat["index"][sel], kind="stable")
    result[gid.decode()] = {k: v[sel][order] for k, v in flat.items()}
  return result


def metrics_of(kind: str, predictions: dict) -> tuple[dict, dict]:
  """Ranking metrics over all configs of each graph with runtimes.

  Returns:
    (collection means, {graph_id: that graph's metrics}).
  """
  per_graph = {}
  for gid, g in predictions.items():
    if not np.any(g["runtime"] > 0):
      continue  # Test split: no runtimes to compare with.
    per_graph[gid] = metrics.graph_metrics(
        kind, -g["score"], g["runtime"].astype(np.float64),
        g["normalizer"].astype(np.float64))
  return metrics.collection_metrics(kind, per_graph.values()), per_graph


def evaluate(score_model: tf.keras.Model, kind: str, files: Sequence[str],
             batch_size: int = 8, join: str = hparams.JOINS[0]
             ) -> tuple[dict, dict]:
  """Scores `files` with the model; returns `metrics_of` the predictions."""
  return metrics_of(kind, RecordScorer(score_model, kind, batch_size,
                                       join)(files))
