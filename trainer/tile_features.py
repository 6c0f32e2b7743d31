"""Physical features of tile configs: what a tile size means for a kernel."""

import tensorflow as tf
import tensorflow_gnn as tfgnn

from schemas import features as F
from trainer import batch_index

_SHAPE = slice(F.SHAPE_DIMS, F.SHAPE_DIMS + F.MAX_RANK)
_OUTPUT_TILE = slice(F.TILE_OUTPUT_BOUNDS, F.TILE_OUTPUT_BOUNDS + F.MAX_RANK)


def tile_config_features(graph: tfgnn.GraphTensor) -> tf.Tensor:
  """What each tile config means for its kernel's output shape.

  The config's output bounds (config features 8-13) count the two most-minor
  dims in TPU tiles (128 lanes, 8 sublanes) and the others in elements, as
  the real tuning protos do; they are turned into element sizes first. From
  the kernel's output shape (node features 21-26 of its root op): per dim,
  log of the number of tiles along it; log of all tiles; log padding waste
  of covering the most-minor and the second-minor dim with whole tiles; log
  of the tile volume in elements. Unknown shapes (a tuple root) give 0.
  [configs, WIDTH] float32.
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
  bounds = config["feat"][:, _OUTPUT_TILE]
  rank = tf.reduce_sum(tf.cast(bounds > 0, tf.int32), axis=1)
  position = tf.range(F.MAX_RANK)[tf.newaxis, :]
  unit = tf.where(position == (rank - 1)[:, tf.newaxis],
                  float(F.TPU_LANES),
                  tf.where(position == (rank - 2)[:, tf.newaxis],
                           float(F.TPU_SUBLANES), 1.0))
  tiles = bounds * unit
  valid = (dims > 0) & (tiles > 0)
  count = tf.math.ceil(dims / tf.maximum(tiles, 1.0))
  per_dim = tf.where(valid, tf.math.log(count), 0.0)
  waste = tf.where(valid, tf.math.log(count * tiles / tf.maximum(dims, 1.0)),
                   0.0)

  def at(values, offset):
    return tf.where(rank >= offset, tf.gather(
        values, tf.maximum(rank - offset, 0), batch_dims=1), 0.0)
  volume = tf.reduce_sum(tf.where(tiles > 0, tf.math.log(
      tf.maximum(tiles, 1.0)), 0.0), axis=1)
  return tf.concat([per_dim, tf.stack([
      tf.reduce_sum(per_dim, axis=1), at(waste, 1), at(waste, 2), volume],
                                      axis=1)], axis=1)


WIDTH = 10  # Columns of `tile_config_features`.
