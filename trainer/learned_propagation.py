"""The layout propagation rule a layout model learns from its data.

Which ops run in their operand's layout, and so how far a chosen layout
spreads and where copies run, is the compiler's and the chip's choice: XLA
lets every same-shape elementwise op inherit its first operand's layout; a
compiler or chip may let only the one-operand ones do so. A model that
assumed one rule would see the copies of another only approximately, so
the layout features carry the propagated layouts and copies under each rule
(`layout_features.PROPAGATION_RULES`) and this layer weighs them: a softmax
over the rules, learned with the rest of the model.
"""

import tensorflow as tf

from trainer import layout_features as lf
from trainer import learned_tiling

_RULES = len(lf.PROPAGATION_RULES)


class LearnedPropagation(tf.keras.layers.Layer):
  """Learned propagation rule: `phys` and `cost_scale` under it.

  Call args:
    phys: [N, PHYS_WIDTH + len(PROPAGATION_RULES) * PROPAGATED_WIDTH]: the
      `physical_layout_features`, then the `propagated_layout_features`
      under each rule.
    cost_scale: Optional [N, len(PROPAGATION_RULES) * COST_SCALE_WIDTH]:
      the `cost_scales` under each rule.

  Call returns:
    [N, PHYS_WIDTH + PROPAGATED_WIDTH]: the physical features and the
    weighted sum of the propagated ones; with `cost_scale`, the pair of that
    and the weighted sum of the cost scales, [N, COST_SCALE_WIDTH].
  """

  def build(self, input_shape):
    del input_shape
    self._logits = self.add_weight(name="rule_logits", shape=[_RULES],
                                   initializer="zeros")

  def weights_by_rule(self) -> tf.Tensor:
    """The learned weight of each of PROPAGATION_RULES."""
    return tf.nn.softmax(learned_tiling.LOGIT_GAIN * self._logits)

  def call(self, phys, cost_scale=None):
    weights = self.weights_by_rule()

    def mix(x, width):  # The rules' blocks are side by side, rule-major.
      if x.shape[-1] != _RULES * width:
        raise ValueError(f"expected {_RULES} x {width} columns of features "
                         f"per propagation rule, got {x.shape[-1]}")
      return tf.einsum("nrw,r->nw", tf.reshape(x, [-1, _RULES, width]),
                       weights)

    mixed = tf.concat([phys[:, :lf.PHYS_WIDTH],
                       mix(phys[:, lf.PHYS_WIDTH:], lf.PROPAGATED_WIDTH)], 1)
    if cost_scale is None:
      return mixed
    return mixed, mix(cost_scale, lf.COST_SCALE_WIDTH)


def learned(model: tf.keras.Model):
  """The rule `model` learned, for its summary: {rule: weight}; None for a
  model without one (tile kind)."""
  for layer in model.submodules:
    if isinstance(layer, LearnedPropagation) and layer.built:
      return dict(zip(lf.PROPAGATION_RULES,
                      layer.weights_by_rule().numpy().round(3).tolist()))
  return None
