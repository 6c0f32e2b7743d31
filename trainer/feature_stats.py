"""Statistics of the signed-log features on the train split."""

from typing import Sequence

import numpy as np

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
  node = [np.zeros(features.NODE_FEATURES), np.zeros(features.NODE_FEATURES),
          0]
  conf = [np.zeros(features.TILE_CONFIG_FEATURES),
          np.zeros(features.TILE_CONFIG_FEATURES), 0]
  ds = input_fn.read_records(files).take(max_examples).batch(16)
  for serialized in ds:
    graph = input_fn.parse_batch(kind, serialized)
    for acc, values in ((node, graph.node_sets["op"]["feat"]),) + (
        ((conf, graph.node_sets["config"]["feat"]),) if kind == "tile" else ()):
      x = values.numpy().astype(np.float64)
      x = np.sign(x) * np.log1p(np.abs(x))
      acc[0] += x.sum(0)
      acc[1] += (x * x).sum(0)
      acc[2] += len(x)
  node_mean, node_var = _moments(*node)
  if kind == "tile":
    conf_mean, conf_var = _moments(*conf)
  else:
    conf_mean = np.zeros(features.TILE_CONFIG_FEATURES, np.float32)
    conf_var = np.ones(features.TILE_CONFIG_FEATURES, np.float32)
  return FeatureStats(node_mean, node_var, conf_mean, conf_var)
