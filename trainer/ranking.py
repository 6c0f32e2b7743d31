"""Ranking-loss plumbing: labels per example and scores in [batch, K]."""

import tensorflow as tf
import tensorflow_gnn as tfgnn

from trainer import batch_index


def labels(kind: str, graph: tfgnn.GraphTensor, k: int) -> tf.Tensor:
  """Ranking labels [E, k] of a merged batch: higher = faster, -1 = padding.

  A config's label is the fastest runtime in its example divided by its own
  (tile: runtimes normalised by the default config's first), in (0, 1]:
  normalised per graph and never negative, since TF-Ranking reads labels < 0
  as padding. Examples with fewer than k configs are padded with -1.
  """
  config = graph.node_sets["config"]
  runtime = tf.cast(config["runtime"], tf.float64)
  if kind == "tile":
    runtime = runtime / tf.maximum(tf.cast(config["normalizer"], tf.float64),
                                   1.0)
  sizes = tf.cast(config.sizes, tf.int32)
  example, slot = batch_index.slots(sizes)
  fastest = tf.math.unsorted_segment_min(runtime, example, tf.size(sizes))
  rel = tf.gather(fastest, example) / tf.maximum(runtime, 1e-9)
  rel = tf.where(runtime > 0, rel, 0.0)  # Unknown runtimes: no preference.
  dense = tf.scatter_nd(tf.stack([example, slot - 1], axis=1),
                        tf.cast(rel, tf.float32) + 1.0,
                        tf.stack([tf.size(sizes), k]))
  return dense - 1.0  # Untouched slots end at -1.


def scores_to_matrix(scores: tf.Tensor, example: tf.Tensor, slot: tf.Tensor,
                     batch: int, k: int) -> tf.Tensor:
  """Places flat per-config scores into [batch, k]; padding (slot 0) drops."""
  real = slot > 0
  row = tf.where(real, example, batch)  # Padding goes to a spare row.
  col = tf.where(real, slot - 1, 0)
  full = tf.scatter_nd(tf.stack([row, col], axis=1), scores,
                       tf.constant([batch + 1, k]))
  return full[:batch]
