"""TPU memory tiling: the tiles that layouts and tile sizes pad to.

The tile sizes themselves live in `schemas.features` (one place, shared with
the simulator).
"""

import tensorflow as tf

from schemas import features as F


def log_padding(size, multiple: float):
  """log of (size rounded up to a multiple) / size: TPU tiling waste."""
  return tf.math.log(tf.math.ceil(size / multiple) * multiple / size)


def minor_paddings(size):
  """[N, len(TILE_LANE_CHOICES)] log padding waste of most-minor dims
  `size` ([N]) to each lane count a layout model weighs."""
  return tf.stack([log_padding(size, float(c))
                   for c in F.TILE_LANE_CHOICES], axis=1)


def second_minor_paddings(size):
  """[N, len(TILE_SUBLANE_CHOICES)] log padding waste of second-minor dims
  `size` ([N]) to each sublane count a layout model weighs."""
  return tf.stack([log_padding(size, float(c))
                   for c in F.TILE_SUBLANE_CHOICES], axis=1)
