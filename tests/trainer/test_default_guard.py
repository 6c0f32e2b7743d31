"""The compiler-default guard: ordering, calibration, metrics."""

import hypothesis
from hypothesis import strategies as st
import numpy as np

from trainer import default_guard


@hypothesis.settings(max_examples=80, deadline=None, derandomize=True)
@hypothesis.given(
    pred=st.lists(st.floats(-10, 10, allow_nan=False), min_size=1,
                  max_size=30),
    margin=st.one_of(st.none(), st.floats(0, 5)),
    data=st.data())
def test_guarded_order_is_a_permutation_that_only_trusts_the_margin(
    pred, margin, data):
  pred = np.array(pred)
  default = data.draw(st.integers(0, len(pred) - 1))
  order = default_guard.guarded_order(pred, margin, default)
  assert sorted(order.tolist()) == list(range(len(pred)))
  pos = int(np.flatnonzero(order == default)[0])
  ahead = order[:pos]
  if margin is None:
    assert pos == 0
  else:
    # Exactly the configs predicted ahead by more than the margin lead,
    # in predicted order; the rest follow in predicted order.
    assert set(ahead.tolist()) == set(np.flatnonzero(
        pred < pred[default] - margin).tolist()) - {default}
  assert np.all(np.diff(pred[ahead]) >= 0)
  assert np.all(np.diff(pred[order[pos + 1:]]) >= 0)


def _graph(rng, n, default_good, model_good):
  """A tile graph's predictions: config 0 is the default."""
  rt = rng.uniform(1.0, 5.0, n)
  if default_good:
    rt[0] = rt.min() * 0.95
  score = -(np.log(rt) + rng.normal(0, 0.01 if model_good else 2.0, n))
  return {"index": np.arange(n), "score": score,
          "runtime": (rt * 1000).astype(np.int64),
          "normalizer": np.full(n, 1000, np.int64)}


def test_calibration_trusts_an_accurate_model_on_a_weak_default():
  rng = np.random.default_rng(0)
  preds = {f"g{i}": _graph(rng, 40, False, True) for i in range(20)}
  guard = default_guard.calibrate(preds)
  assert guard["margin"] is not None
  assert guard["precision"] >= default_guard.TARGET_PRECISION
  assert guard["valid_top1_error"] < guard["default_top1_error"]
  guarded = default_guard.guarded_metrics(preds, guard["margin"])[0]
  assert guarded["top1_error"] == guard["valid_top1_error"]


def test_calibration_keeps_the_default_first_for_a_noisy_model():
  rng = np.random.default_rng(1)
  preds = {f"g{i}": _graph(rng, 40, True, False) for i in range(20)}
  guard = default_guard.calibrate(preds)
  assert guard["margin"] is None
  means, per_graph = default_guard.guarded_metrics(preds, None)
  # The default leads every graph: its top-1 error is the default's own.
  assert means["top1_error"] == guard["default_top1_error"]
  assert len(per_graph) == 20


def test_margin_of_metadata():
  assert default_guard.margin_of({}) is None
  assert not default_guard.has_guard({})
  meta = {default_guard.METADATA_KEY: {"margin": 0.5}}
  assert default_guard.margin_of(meta) == 0.5 and default_guard.has_guard(meta)
