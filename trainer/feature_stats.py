"""Statistics of the signed-log features on the train split."""

from typing import Sequence

import numpy as np
import tensorflow as tf

from schemas import features
from trainer import input_fn
from trainer.model import FeatureStats


def _moments(total, total_sq, count):
  mean = total / max(count, 1)
  var = np.maximum(total_sq / max(count, 1) - mean**2, 0.0)
  # A feature (nearly) constant on the train split must not blow up
  # elsewhere: below a standard deviation of 0.1 (signed-log units) it
  # counts as constant.
  var = np.where(var < 1e-2, 1.0, var)
  return mean.astype(np.float32), var.astype(np.float32)


def compute(files: Sequence[str], kind: str,
            max_examples: int = 500) -> FeatureStats:
  """Mean/variance of signed-log node (and tile config) features.

  Args:
    files: Train TFRecords.
    kind: "tile" or "layout".
    max_examples: Examples to read (the first ones; records are shuffled
      across graphs by conversion only within a graph, so read enough).
  """
  sets = ["op"] + (["config"] if kind == "tile" else [])

  def sums(serialized):
    # In tf.data (traced once, parallel), not eagerly per batch: this runs
    # before every training.
    graph = input_fn.parse_batch(kind, serialized)
    out = []
    for name in sets:
      x = tf.cast(graph.node_sets[name]["feat"], tf.float64)
      x = tf.sign(x) * tf.math.log1p(tf.abs(x))
      out.append((tf.reduce_sum(x, 0), tf.reduce_sum(x * x, 0),
                  tf.cast(tf.shape(x)[0], tf.float64)))
    return tuple(out)

  ds = input_fn.read_records(files).take(max_examples).batch(16).map(
      input_fn.plain_graph_fn(sums), num_parallel_calls=tf.data.AUTOTUNE)
  zeros = tf.nest.map_structure(lambda s: tf.zeros(s.shape, s.dtype),
                                ds.element_spec)
  totals = ds.reduce(zeros, lambda acc, x: tf.nest.map_structure(
      tf.add, acc, x))
  node, conf = [[np.asarray(v) for v in t] for t in (totals[0], totals[-1])]
  node_mean, node_var = _moments(*node)
  if kind == "tile":
    conf_mean, conf_var = _moments(*conf)
  else:
    conf_mean = np.zeros(features.TILE_CONFIG_FEATURES, np.float32)
    conf_var = np.ones(features.TILE_CONFIG_FEATURES, np.float32)
  return FeatureStats(node_mean, node_var, conf_mean, conf_var)
