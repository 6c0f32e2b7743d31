"""The learned tiling: exact padding once settled, and learned from costs."""

import numpy as np
import tensorflow as tf

from schemas import features as F
from trainer import hparams
from trainer import layout_features as lf
from trainer import learned_tiling


def _shapes(n, seed):
  """n random 2-D shapes (dims, current layout (1, 0), compiler default)."""
  rng = np.random.default_rng(seed)
  dims = np.zeros((n, F.MAX_RANK), np.float32)
  dims[:, 0] = rng.integers(1, 100, n)  # Second-minor.
  dims[:, 1] = rng.integers(1, 700, n)  # Most-minor.
  current = np.full((n, F.MAX_RANK), -1, np.float32)
  current[:, :2] = (1, 0)
  return dims, current, np.full_like(current, -1)


def _log_padding(dims, sublanes, lanes):
  """By hand: log padded / real volume of [second, minor] dims."""
  second, minor = dims[:, 0], dims[:, 1]
  padded = np.ceil(minor / lanes) * lanes * np.ceil(second / sublanes) * sublanes
  return np.log(padded / (minor * second))


def _phys(dims, current, chosen):
  """A `phys` whose four tiled layouts are all this one."""
  block = lf.layout_phys(dims, current, chosen).numpy()
  rest = lf.PROPAGATED_WIDTH - lf.TILING.stop
  return np.concatenate([block] * 3 + [block[:, :lf.TILING.stop],
                                       np.zeros((len(dims), rest))], axis=1)


def _settle(layer, sublanes, lanes):
  """Puts all the layer's weight on one tiling."""
  layer.set_weights([
      np.where(np.array(F.TILE_LANE_CHOICES) == lanes, 5.0, -5.0),
      np.where(np.array(F.TILE_SUBLANE_CHOICES) == sublanes, 5.0, -5.0)])


def test_a_settled_tiling_pads_as_that_tiling_does():
  dims, current, chosen = _shapes(64, 0)
  phys = _phys(dims, current, chosen)
  layer = learned_tiling.LearnedTiling()
  layer(phys)  # Builds it.
  for sublanes, lanes in ((8, 128), (16, 256), (32, 128)):
    _settle(layer, sublanes, lanes)
    mixed, cost = layer(phys, np.ones((64, lf.COST_SCALE_WIDTH), np.float32))
    mixed, cost = mixed.numpy(), cost.numpy()
    # Three chosen layouts of 7 columns, the effective one's sizes and
    # paddings (5), then the rest of the propagated columns.
    assert mixed.shape == (64, 3 * 7 + 5 + lf.PROPAGATED_WIDTH
                           - lf.TILING.stop)
    want = _log_padding(dims, sublanes, lanes)
    for block in range(4):  # Each layout: sizes, then its three paddings.
      start = 7 * block
      np.testing.assert_allclose(mixed[:, start:start + 2],
                                 phys[:, :2], rtol=1e-6)
      np.testing.assert_allclose(mixed[:, start + 4], want, atol=1e-5)
    padded = [c for c, p in enumerate(lf.COST_PADDING) if p >= 0]
    np.testing.assert_allclose(cost[:, padded],
                               np.exp(want)[:, None].repeat(len(padded), 1),
                               rtol=1e-5)
    np.testing.assert_allclose(np.delete(cost, padded, axis=1), 1.0)


def _learn(sublanes, lanes, steps=300):
  """Trains a fresh layer alone to predict the padded volume of random
  shapes under (sublanes, lanes); returns the weights it learned."""
  dims, current, chosen = _shapes(256, 1)
  phys = tf.constant(_phys(dims, current, chosen), tf.float32)
  target = tf.constant(_log_padding(dims, sublanes, lanes), tf.float32)
  layer = learned_tiling.LearnedTiling()
  layer(phys)
  optimizer = tf.keras.optimizers.Adam(hparams.TrainConfig.learning_rate)
  for _ in range(steps):
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean((layer(phys)[:, 4] - target) ** 2)
    grads = tape.gradient(loss, layer.trainable_variables)
    optimizer.apply_gradients(zip(grads, layer.trainable_variables))
  lane_w, sublane_w = (w.numpy() for w in layer.weights_by_choice())
  return (dict(zip(F.TILE_SUBLANE_CHOICES, sublane_w)),
          dict(zip(F.TILE_LANE_CHOICES, lane_w)))


def test_the_tiling_is_learned_from_padded_sizes():
  """From a uniform start, the trainer's learning rate finds the tiling
  behind the targets within a few hundred steps, whichever it is."""
  for sublanes, lanes in ((16, 256), (8, 128), (32, 128)):
    sublane_w, lane_w = _learn(sublanes, lanes)
    assert sublane_w[sublanes] > 0.9, (sublanes, lanes, sublane_w)
    assert lane_w[lanes] > 0.9, (sublanes, lanes, lane_w)
