"""Tests for the late-join expansion: per config, exactly what it changes."""

import numpy as np
import pytest
import tensorflow as tf

from tests.trainer.helpers import make_records
from trainer import config_rows
from trainer import graph_ops
from trainer import input_fn
from trainer import layout_features as lf


def _both(tmp_path, graphs=2, k=5, examples=3):
  path, _ = make_records(tmp_path, "layout", graphs=graphs, k=k,
                         split="valid")
  serialized = next(iter(input_fn.read_records([path]).batch(examples)))
  merged = input_fn.parse_batch("layout", serialized)
  return (merged, graph_ops.expand("layout", merged, "early"),
          config_rows.expand_layout_late(merged))


def _pairs(merged, early, late):
  """For each (config, op of R) pair: its row and the early-join op copy it
  stands for."""
  n = merged.node_sets["op"].sizes.numpy()
  adds_to = late.edge_sets["adds_to"].adjacency
  row, comp = adds_to.source.numpy(), adds_to.target.numpy()
  example = late.context["example"].numpy()
  op = late.edge_sets["reads"].adjacency.source.numpy()[row]
  copy_off = np.r_[0, np.cumsum(early.node_sets["op"].sizes.numpy())]
  op_off = np.r_[0, np.cumsum(n)]
  return row, copy_off[comp] + op - op_off[example[comp]]


def test_rows_carry_exactly_the_early_join_features(tmp_path):
  merged, early, late = _both(tmp_path)
  row, copy = _pairs(merged, early, late)
  assert len(copy) and len(copy) < early.node_sets["op"].total_size
  assert len(np.unique(copy)) == len(copy)  # One pair per op copy.
  rows = late.node_sets["config_op"]
  for name in ("phys", "cost_scale"):
    np.testing.assert_allclose(rows[name].numpy()[row],
                               early.node_sets["op"][name].numpy()[copy],
                               atol=1e-6)
  # The graphs hold ops where the propagation rules disagree, so the rows
  # match under both.
  phys = rows["phys"].numpy()
  rule_blocks = phys[:, lf.PHYS_WIDTH:].reshape(
      len(phys), len(lf.PROPAGATION_RULES), lf.PROPAGATED_WIDTH)
  assert (rule_blocks[:, 0] != rule_blocks[:, 1]).any()
  # Configurable pairs carry their config's values and the flag.
  cfg = rows["cfg"].numpy()[row]
  flags = cfg[:, -1]
  assert set(np.unique(flags)) <= {0.0, 1.0} and flags.sum() == (
      merged.node_sets["node_config"].total_size)
  np.testing.assert_array_equal(
      np.sort(cfg[flags == 1, :-1], axis=0),
      np.sort(merged.node_sets["node_config"]["feat"].numpy(), axis=0))


def test_configs_that_agree_share_rows(tmp_path):
  """Pairs share rows; configs with equal values share all of them."""
  merged, early, late = _both(tmp_path, k=16)
  row, _ = _pairs(merged, early, late)
  num_rows = late.node_sets["config_op"].total_size
  assert 0 < num_rows < len(row)
  np.testing.assert_array_equal(np.unique(row), np.arange(num_rows))
  # One example whose 16 configs all carry its first config's values.
  merged, _, _ = _both(tmp_path, k=16, examples=1)
  nc = merged.node_sets["node_config"]
  per_config = nc.total_size // 16
  same = merged.replace_features(node_sets={"node_config": {
      "feat": tf.tile(nc["feat"][:per_config], [16, 1])}})
  late = config_rows.expand_layout_late(same)
  pairs = late.edge_sets["adds_to"].sizes.numpy()
  assert len(set(pairs)) == 1  # Every config: the same ops of R ...
  # ... and one row each, shared by every config.
  assert late.node_sets["config_op"].total_size == pairs[0]
  np.testing.assert_array_equal(late.node_sets["config_op"].sizes,
                                np.r_[pairs[0], np.zeros(15, int)])


def test_keys_too_wide_for_int64_leave_rows_unshared(tmp_path,
                                                     monkeypatch):
  monkeypatch.setattr(config_rows, "_MAX_KEY", 0.0)
  merged, early, late = _both(tmp_path)
  row, copy = _pairs(merged, early, late)
  np.testing.assert_array_equal(row, np.arange(len(row)))
  np.testing.assert_allclose(late.node_sets["config_op"]["phys"],
                             early.node_sets["op"]["phys"].numpy()[copy],
                             atol=1e-6)


def test_layout_ids_hashed_or_counted_densely_give_the_same_rows(
    tmp_path, monkeypatch):
  """Too many (configurable op, layout) cells for a dense table: the hashed
  ids give the same rows, features and edges."""
  merged, _, dense = _both(tmp_path, k=16)
  monkeypatch.setattr(config_rows, "_DENSE_CELLS", 0)
  hashed = config_rows.expand_layout_late(merged)
  # The same rows (to an ulp: vectorised logs round a table's tail apart).
  for name, value in dense.node_sets["config_op"].features.items():
    np.testing.assert_allclose(hashed.node_sets["config_op"][name], value,
                               rtol=1e-6, atol=1e-6)
  for name in ("reads", "adds_to"):
    for end in ("source", "target"):
      np.testing.assert_array_equal(
          getattr(hashed.edge_sets[name].adjacency, end),
          getattr(dense.edge_sets[name].adjacency, end))


def test_ops_without_rows_look_the_same_under_every_config(tmp_path):
  merged, early, late = _both(tmp_path)
  sizes = early.node_sets["op"].sizes.numpy()
  comp = np.repeat(np.arange(len(sizes)), sizes)
  local = np.arange(len(comp)) - np.r_[0, np.cumsum(sizes)][comp]
  example = early.context["example"].numpy()[comp]
  outside = np.ones(len(comp), bool)
  outside[_pairs(merged, early, late)[1]] = False
  feats = np.concatenate([early.node_sets["op"]["phys"].numpy(),
                          early.node_sets["op"]["cost_scale"].numpy()], 1)
  seen = {}
  for i in np.flatnonzero(outside):
    key = (example[i], local[i])
    if key in seen:
      np.testing.assert_allclose(feats[i], feats[seen[key]], atol=1e-6)
    seen[key] = i
  assert len(seen) < outside.sum()  # Configs of one example were compared.


def test_graph_is_held_once_per_example(tmp_path):
  merged, _, late = _both(tmp_path)
  n = merged.node_sets["op"].sizes.numpy()
  m = merged.edge_sets["feed"].sizes.numpy()
  slot = late.context["slot"].numpy()
  example = late.context["example"].numpy()
  np.testing.assert_array_equal(late.node_sets["op"].sizes,
                                np.where(slot == 1, n[example], 0))
  np.testing.assert_array_equal(late.edge_sets["feed"].sizes,
                                np.where(slot == 1, m[example], 0))
  np.testing.assert_array_equal(late.node_sets["op"]["feat"],
                                merged.node_sets["op"]["feat"])
  rev = late.edge_sets["rev"].adjacency
  feed = late.edge_sets["feed"].adjacency
  np.testing.assert_array_equal(rev.source, feed.target)
  # Rows and pairs of a config read ops of its own example only.
  rows = late.node_sets["config_op"].sizes.numpy()
  op_example = np.repeat(np.arange(len(n)), n)
  reads = late.edge_sets["reads"].adjacency.source.numpy()
  np.testing.assert_array_equal(op_example[reads],
                                np.repeat(example, rows))
  adds_to = late.edge_sets["adds_to"].adjacency
  np.testing.assert_array_equal(
      op_example[reads[adds_to.source.numpy()]],
      example[adds_to.target.numpy()])


def test_config_values_outside_the_format_are_refused(tmp_path):
  merged, _, _ = _both(tmp_path)
  feat = merged.node_sets["node_config"]["feat"]
  for bad in (6.0, 0.5, -2.0):
    graph = merged.replace_features(node_sets={"node_config": {
        "feat": tf.tensor_scatter_nd_update(feat, [[0, 3]], [bad])}})
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="node_config_feat: expected -1 or a dimension"):
      config_rows.expand_layout_late(graph)
