"""TPU memory tiling: the (8, 128) tiles that layouts and tile sizes pad to.

The tile sizes themselves live in `schemas.features` (one place, shared with
the simulator).
"""

import tensorflow as tf

from schemas import features as F

def log_padding(size, multiple: float):
  """log of (size rounded up to a multiple) / size: TPU tiling waste."""
  return tf.math.log(tf.math.ceil(size / multiple) * multiple / size)



def minor_padding(size):
  """log padding waste of a most-minor dim (to the TPU lane count)."""
  return log_padding(size, float(F.TPU_LANES))


def second_minor_padding(size):
  """log padding waste of a second-minor dim (to the sublane count)."""
  return log_padding(size, float(F.TPU_SUBLANES))
