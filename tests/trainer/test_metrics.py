"""Tests for the ranking metrics against brute force."""

import itertools

import numpy as np
import pytest

from trainer import metrics


def _brute_opa(pred, rt):
  good = total = 0
  for i, j in itertools.combinations(range(len(rt)), 2):
    if rt[i] == rt[j]:
      continue
    total += 1
    good += (pred[i] < pred[j]) == (rt[i] < rt[j])
  return good / total


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_opa_matches_brute_force_with_runtime_ties(seed):
  rng = np.random.default_rng(seed)
  rt = rng.integers(0, 6, size=40).astype(float)  # Many ties.
  pred = rt + rng.normal(0, 2, size=40)
  assert np.isclose(metrics.ordered_pair_accuracy(pred, rt),
                    _brute_opa(pred, rt))


def test_perfect_and_reversed_rankings():
  rt = np.array([5., 1., 3., 2.])
  assert metrics.kendall_tau(rt, rt) == pytest.approx(1)
  assert metrics.kendall_tau(-rt, rt) == pytest.approx(-1)
  assert metrics.ordered_pair_accuracy(-rt, rt) == pytest.approx(0)


def test_top_k_error():
  rt = np.array([2.0, 1.0, 4.0, 1.5])
  pred = np.array([0.0, 3.0, 1.0, 2.0])  # Predicted order: 0, 2, 3, 1.
  assert metrics.top_k_error(pred, rt, 1) == pytest.approx(1.0)
  assert metrics.top_k_error(pred, rt, 3) == pytest.approx(0.5)
  assert metrics.top_k_error(pred, rt, 4) == 0


def test_collection_metrics_average_and_skip_nan():
  out = metrics.collection_metrics("layout", [
      {"kendall_tau": 0.5, "opa": 0.75},
      {"kendall_tau": float("nan"), "opa": 0.25}])
  assert out == {"kendall_tau": 0.5, "opa": 0.5, "graphs": 2}


def test_layout_metrics_include_the_slowdown_of_the_predicted_best():
  rt = np.array([2.0, 1.0, 4.0, 1.5])
  out = metrics.graph_metrics("layout", np.array([0.0, 3.0, 1.0, 2.0]), rt)
  assert out["top1_error"] == pytest.approx(1.0)  # Picks config 0: 2 / 1.
  assert out["opa"] == pytest.approx(1 / 6)  # Only (0, 2) is ordered right.
