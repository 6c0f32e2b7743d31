"""Tests of the train-split feature statistics saved with the model."""

import numpy as np
import pytest

from tests.trainer import helpers
from trainer import feature_stats
from trainer import input_fn


def _reference(path, kind, node_set, limit=None):
  """Signed-log mean/var of one node set's features, parsed eagerly.

  Near-constant features (variance < 1e-2) are expected unscaled (variance 1),
  not blown up; `raw_var` keeps their variance to check both branches exist.
  """
  rows = []
  for serialized in input_fn.read_records([path]).batch(1).take(limit or -1):
    feat = input_fn.parse_batch(kind, serialized).node_sets[node_set]["feat"]
    rows.append(feat.numpy().astype(np.float64))
  x = np.concatenate(rows)
  x = np.sign(x) * np.log1p(np.abs(x))
  raw_var = x.var(0)
  return x.mean(0), np.where(raw_var < 1e-2, 1.0, raw_var), raw_var


def _assert_close(actual, expected):
  np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["tile", "layout"])
def test_compute_matches_an_eager_reference(tmp_path, kind):
  path, _ = helpers.make_records(tmp_path, kind, graphs=3, k=4)
  stats = feature_stats.compute([path], kind)

  mean, var, raw_var = _reference(path, kind, "op")
  constant = raw_var < 1e-2
  assert constant.any() and (~constant).any()  # Both branches are checked.
  _assert_close(stats.node_mean, mean)
  _assert_close(stats.node_var, var)
  if kind == "tile":
    mean, var, _ = _reference(path, kind, "config")
    _assert_close(stats.config_mean, mean)
    _assert_close(stats.config_var, var)
  else:  # Layout configs are one-hots: not standardised.
    assert not np.any(stats.config_mean)
    assert np.all(stats.config_var == 1.0)


def test_compute_reads_at_most_max_examples(tmp_path):
  path, _ = helpers.make_records(tmp_path, "tile", graphs=3, k=4)
  stats = feature_stats.compute([path], "tile", max_examples=1)
  _assert_close(stats.node_mean, _reference(path, "tile", "op", limit=1)[0])
