"""Index arithmetic on merged batches: items grouped consecutively by sizes.

Shared by the graph expansion, the physical features and the ranking labels;
plain tensor ops, so it runs in tf.data, the serving signature and on any
device.
"""

import tensorflow as tf


def exclusive_cumsum(x):
  return tf.math.cumsum(x, exclusive=True)


def ragged_ranges(starts, sizes):
  """Concatenation of range(starts[i], starts[i] + sizes[i])."""
  return tf.ragged.range(starts, starts + sizes).flat_values


def segment_ids(sizes):
  """Group id of every item, for items grouped consecutively by sizes."""
  sizes = tf.cast(sizes, tf.int32)
  return tf.repeat(tf.range(tf.size(sizes)), sizes)


def slots(sizes):
  """(example, 1 + position) of every item, for items grouped by sizes."""
  sizes = tf.cast(sizes, tf.int32)
  example = segment_ids(sizes)
  position = tf.range(tf.reduce_sum(sizes)) - tf.gather(
      exclusive_cumsum(sizes), example)
  return example, position + 1
