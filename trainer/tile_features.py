"""Physical features of tile configs: what a tile size means for a kernel."""

import tensorflow as tf
import tensorflow_gnn as tfgnn

from schemas import features as F
from trainer import batch_index
from trainer import tpu_tiling

_SHAPE = slice(F.SHAPE_DIMS, F.SHAPE_DIMS + F.MAX_RANK)
_OUTPUT_TILE = slice(F.TILE_OUTPUT_BOUNDS, F.TILE_OUTPUT_BOUNDS + F.MAX_RANK)


def tile_config_features(graph: tfgnn.GraphTensor) -> tf.Tensor:
  """What each tile config means for its kernel's output shape.

  From the kernel's output shape (node features 21-26 of its root op) and
  the config's output tile sizes (config features 8-13): per dim, log of the
  number of tiles along it; log of all tiles; log padding waste of the tile's
  most-minor size to 128 and second-minor to 8 (TPU's (8, 128) tiling); log
  of the padded tile volume. [configs, WIDTH] float32.
  """
  op = graph.node_sets["op"]
  feat = op["feat"]
  n = tf.shape(feat)[0]
  comp_of_node = batch_index.segment_ids(op.sizes)
  is_root = feat[:, F.IS_ROOT] > 0
  root = tf.math.unsorted_segment_max(
      tf.where(is_root, tf.range(n), -1), comp_of_node, tf.size(op.sizes))
  root = tf.maximum(root, 0)
  config = graph.node_sets["config"]
  comp_of_config = batch_index.segment_ids(config.sizes)
  dims = tf.gather(tf.gather(feat, root)[:, _SHAPE], comp_of_config)
  tiles = config["feat"][:, _OUTPUT_TILE]
  valid = (dims > 0) & (tiles > 0)
  per_dim = tf.where(valid, tf.math.log(tf.math.ceil(
      dims / tf.maximum(tiles, 1.0))), 0.0)
  rank = tf.reduce_sum(tf.cast(dims > 0, tf.int32), axis=1)
  minor = tf.gather(tiles, tf.maximum(rank - 1, 0), batch_dims=1)
  second = tf.where(rank >= 2, tf.gather(tiles, tf.maximum(rank - 2, 0),
                                         batch_dims=1), 1.0)
  minor, second = tf.maximum(minor, 1.0), tf.maximum(second, 1.0)
  pad_minor = tpu_tiling.minor_padding(minor)
  pad_second = tpu_tiling.second_minor_padding(second)
  volume = tf.reduce_sum(tf.where(valid, tf.math.log(tf.maximum(tiles, 1.0)),
                                  0.0), axis=1) + pad_minor + pad_second
  return tf.concat([per_dim, tf.stack([
      tf.reduce_sum(per_dim, axis=1), pad_minor, pad_second, volume],
                                      axis=1)], axis=1)


WIDTH = 10  # Columns of `tile_config_features`.
