"""The learned propagation rule: a settled rule passes its features through,
and the rule behind a cost is learned from it."""

import numpy as np
import tensorflow as tf

from trainer import hparams
from trainer import layout_features as lf
from trainer import learned_propagation

_RULES = len(lf.PROPAGATION_RULES)


def _features(n, seed):
  """Random `phys` and `cost_scale` under every rule (copy flags 0/1)."""
  rng = np.random.default_rng(seed)
  phys = rng.normal(size=(n, lf.PHYS_WIDTH + _RULES * lf.PROPAGATED_WIDTH))
  phys[:, lf.PHYS_WIDTH:] = rng.integers(0, 2, phys[:, lf.PHYS_WIDTH:].shape)
  cost = rng.uniform(0, 3, size=(n, _RULES * lf.COST_SCALE_WIDTH))
  return phys.astype(np.float32), cost.astype(np.float32)


def test_a_settled_rule_passes_its_features_through():
  phys, cost = _features(32, 0)
  layer = learned_propagation.LearnedPropagation()
  layer(phys)  # Builds it.
  for r, rule in enumerate(lf.PROPAGATION_RULES):
    layer.set_weights([np.where(np.arange(_RULES) == r, 5.0, -5.0)])
    mixed, mixed_cost = (x.numpy() for x in layer(phys, cost))
    assert mixed.shape == (32, lf.PHYS_WIDTH + lf.PROPAGATED_WIDTH), rule
    np.testing.assert_allclose(mixed[:, :lf.PHYS_WIDTH],
                               phys[:, :lf.PHYS_WIDTH])
    start = lf.PHYS_WIDTH + r * lf.PROPAGATED_WIDTH
    np.testing.assert_allclose(mixed[:, lf.PHYS_WIDTH:],
                               phys[:, start:start + lf.PROPAGATED_WIDTH],
                               atol=1e-6)
    w = lf.COST_SCALE_WIDTH
    np.testing.assert_allclose(mixed_cost, cost[:, r * w:(r + 1) * w],
                               atol=1e-6)


def test_the_rule_is_learned_from_the_copies_it_implies():
  """From a uniform start, the trainer's learning rate finds the rule
  whose copies the targets count within a few hundred steps."""
  phys, cost = _features(256, 1)
  copies = [lf.PHYS_WIDTH + c for c in lf.PROP_COPY]
  for r, rule in enumerate(lf.PROPAGATION_RULES):
    target = tf.constant(phys[:, [c + r * lf.PROPAGATED_WIDTH
                                  for c in copies]].sum(1))
    layer = learned_propagation.LearnedPropagation()
    layer(phys)
    optimizer = tf.keras.optimizers.Adam(hparams.TrainConfig.learning_rate)
    for _ in range(300):
      with tf.GradientTape() as tape:
        guess = tf.reduce_sum(tf.gather(layer(phys), copies, axis=1), 1)
        loss = tf.reduce_mean((guess - target) ** 2)
      grads = tape.gradient(loss, layer.trainable_variables)
      optimizer.apply_gradients(zip(grads, layer.trainable_variables))
    weights = dict(zip(lf.PROPAGATION_RULES, layer.weights_by_rule().numpy()))
    assert weights[rule] > 0.9, (rule, weights)
