"""The TPU tiling a layout model learns from the data it trains on.

Which sizes a layout pads depends on the chip's memory tiling: 8 x 128 for
32-bit types on today's TPUs, 16 or 32 sublanes for narrower types, other
lane counts on other matrix units. A model that assumed one tiling would
learn the padding of another chip only approximately, so the layout
features carry the padding under every tiling choice
(`layout_features.TILING`) and this layer weighs them: a softmax over the
lane choices and one over the sublane choices, learned with the rest of
the model, give each layout's log padding.
"""

import tensorflow as tf

from schemas import features as F
from trainer import layout_features as lf

# Adam moves a weight about one learning rate per step: the mixture logits
# are this many times their variables, so that one run of a few hundred
# steps can settle on one tiling.
LOGIT_GAIN = 10.0


class LearnedTiling(tf.keras.layers.Layer):
  """Learned tiling: `phys` with each layout's padding under it.

  Call args:
    phys: [N, PHYS_WIDTH + PROPAGATED_WIDTH] layout features (the
      concatenation of `physical_layout_features` and
      `propagated_layout_features`).
    cost_scale: Optional [N, COST_SCALE_WIDTH] `cost_scales`.

  Call returns:
    `phys` with the TILING columns of each layout replaced by three: the
    log padding of its most-minor dim, of its second-minor dim and of its
    volume under the learned tiling. With `cost_scale`, the pair of that
    and the cost scales padded as `COST_PADDING` says.
  """

  def build(self, input_shape):
    del input_shape
    self._lanes = self.add_weight(
        name="lane_logits", shape=[len(F.TILE_LANE_CHOICES)],
        initializer="zeros")
    self._sublanes = self.add_weight(
        name="sublane_logits", shape=[len(F.TILE_SUBLANE_CHOICES)],
        initializer="zeros")

  def weights_by_choice(self) -> tuple[tf.Tensor, tf.Tensor]:
    """The learned weights of the lane and of the sublane choices."""
    return (tf.nn.softmax(LOGIT_GAIN * self._lanes),
            tf.nn.softmax(LOGIT_GAIN * self._sublanes))

  def call(self, phys, cost_scale=None):
    lanes, sublanes = self.weights_by_choice()
    split = lf.TILING.start + len(F.TILE_LANE_CHOICES)
    parts, paddings, done = [], [], 0
    for start in lf.TILED_LAYOUTS:
      minor = phys[:, start + lf.TILING.start:start + split] @ lanes[:, None]
      second = (phys[:, start + split:start + lf.TILING.stop] @
                sublanes[:, None])
      paddings.append(minor + second)
      parts += [phys[:, done:start + lf.TILING.start], minor, second,
                minor + second]
      done = start + lf.TILING.stop
    parts.append(phys[:, done:])
    mixed = tf.concat(parts, axis=1)
    if cost_scale is None:
      return mixed
    padding = tf.concat(paddings + [tf.zeros_like(paddings[0])], axis=1)
    # -1 (no padding) picks the zeros column.
    none = len(lf.TILED_LAYOUTS)
    scale = tf.exp(tf.gather(
        padding, [i if i >= 0 else none for i in lf.COST_PADDING], axis=1))
    return mixed, cost_scale * scale


def learned(model: tf.keras.Model):
  """The tiling `model` learned, for its summary: {"lanes": {choice:
  weight}, "sublanes": {...}}; None for a model without one (tile kind)."""
  for layer in model.submodules:
    if isinstance(layer, LearnedTiling) and layer.built:
      lanes, sublanes = layer.weights_by_choice()
      return {"lanes": dict(zip(map(str, F.TILE_LANE_CHOICES),
                                lanes.numpy().round(3).tolist())),
              "sublanes": dict(zip(map(str, F.TILE_SUBLANE_CHOICES),
                                   sublanes.numpy().round(3).tolist()))}
  return None
