"""TPU memory tiling: the tiles that layouts and tile sizes pad to.

The tile sizes themselves live in `schemas.features` (one place, shared with
the simulator).
"""

import tensorflow as tf



def log_padding(size, multiple: float):
  """log of (size rounded up to a multiple) / size: TPU tiling waste."""
  return tf.math.log(tf.math.ceil(size / multiple) * multiple / size)


def log_paddings(size, multiples) -> tf.Tensor:
  """[N, len(multiples)] `log_padding` of sizes `size` ([N]) to each of
  `multiples` (a layout model's lane or sublane choices)."""
  return tf.stack([log_padding(size, float(m)) for m in multiples], axis=1)
