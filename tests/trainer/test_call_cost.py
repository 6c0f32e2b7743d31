"""The call cost model: one formula for the scorers and the signature."""

import numpy as np
import pytest
import tensorflow as tf

from trainer import call_cost


@pytest.mark.parametrize("join", ["late", "early"])
@pytest.mark.parametrize("ops,configurable", [(554, 176), (2219, 512),
                                              (44000, 3), (10, 0)])
def test_configs_per_example_fit_the_budget_in_python_and_tf(
    join, ops, configurable):
  budget = 400_000
  k = call_cost.configs_per_example(ops, configurable, join, budget)
  assert k >= 1
  if configurable:  # Fits, and one more would not.
    assert call_cost.example_cost(ops, k, configurable, join) <= budget
    assert call_cost.example_cost(ops, k + 1, configurable, join) > budget
  in_tf = call_cost.configs_per_example(
      tf.constant(float(ops)), tf.constant(float(configurable)), join,
      float(budget), float(1 << 30), tf.minimum, tf.maximum)
  assert int(in_tf.numpy()) == int(k)


def test_late_join_examples_cost_far_less_than_early():
  late = call_cost.example_cost(2219, 1000, 512, "late")
  early = call_cost.example_cost(2219, 1000, 512, "early")
  assert early == 2219 * 1000
  assert late < early / 4
  assert call_cost.configs_per_example(2219, 512, "late", most=64) == 64
  np.testing.assert_equal(call_cost.example_cost(50, 7, 0, "early"), 50.0)
