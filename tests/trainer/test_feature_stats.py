"""Tests of the train-split feature statistics saved with the model."""

import numpy as np
import pytest

from tests.trainer import helpers
from trainer import feature_stats
from trainer import input_fn


def _reference(path, kind, node_set):
  """Signed-log mean/var of one node set's features, parsed eagerly."""
  rows = []
  for serialized in input_fn.read_records([path]).batch(1):
    feat = input_fn.parse_batch(kind, serialized).node_sets[node_set]["feat"]
    rows.append(feat.numpy().astype(np.float64))
  x = np.concatenate(rows)
  x = np.sign(x) * np.log1p(np.abs(x))
  return x.mean(0), x.var(0)


@pytest.mark.parametrize("kind", ["tile", "layout"])
def test_compute_matches_an_eager_reference(tmp_path, kind):
  path, _ = helpers.make_records(tmp_path, kind, graphs=3, k=4)
  stats = feature_stats.compute([path], kind)

  mean, var = _reference(path, kind, "op")
  constant = var < 1e-2
  assert constant.any() and (~constant).any()  # Both branches are checked.
  np.testing.assert_allclose(stats.node_mean, mean, rtol=1e-5, atol=1e-6)
  # Near-constant features are left unscaled (variance 1), not blown up.
  np.testing.assert_allclose(stats.node_var, np.where(constant, 1.0, var),
                             rtol=1e-5, atol=1e-6)
  if kind == "tile":
    mean, var = _reference(path, kind, "config")
    np.testing.assert_allclose(stats.config_mean, mean, rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(stats.config_var,
                               np.where(var < 1e-2, 1.0, var), rtol=1e-5,
                               atol=1e-6)
  else:  # Layout configs are one-hots: not standardised.
    assert not np.any(stats.config_mean)
    assert np.all(stats.config_var == 1.0)


def test_compute_reads_at_most_max_examples(tmp_path):
  path, _ = helpers.make_records(tmp_path, "tile", graphs=3, k=4)
  first = next(iter(input_fn.read_records([path]).batch(1)))
  feat = input_fn.parse_batch("tile", first).node_sets["op"]["feat"].numpy()
  x = np.sign(feat) * np.log1p(np.abs(feat.astype(np.float64)))

  stats = feature_stats.compute([path], "tile", max_examples=1)

  np.testing.assert_allclose(stats.node_mean, x.mean(0), rtol=1e-5,
                             atol=1e-6)
