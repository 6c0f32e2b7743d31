"""Picks the tf.distribute strategy at run time."""

from typing import Optional

import tensorflow as tf


def pick_strategy(tpu: Optional[str] = None,
                  mirrored: bool = False) -> tf.distribute.Strategy:
  """TPUStrategy if `tpu` resolves, MirroredStrategy if asked, else default.

  Args:
    tpu: A TPU name or address for TPUClusterResolver ("local" for a TPU VM),
      or None.
    mirrored: Use MirroredStrategy over all local devices.

  Raises:
    ValueError: If a TPU was asked for but none resolves.
  """
  if tpu:
    try:
      resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
      tf.config.experimental_connect_to_cluster(resolver)
      tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, tf.errors.OpError) as e:
      raise ValueError(f"--tpu {tpu}: no TPU could be resolved ({e}); drop "
                       "--tpu to train on this machine's devices") from e
    return tf.distribute.TPUStrategy(resolver)
  if mirrored:
    return tf.distribute.MirroredStrategy()
  return tf.distribute.get_strategy()
