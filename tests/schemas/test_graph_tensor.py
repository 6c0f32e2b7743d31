"""Tests for the GraphSchemas and the npz -> GraphTensor -> tf.Example path."""

import numpy as np
import pytest
import tensorflow_gnn as tfgnn

from schemas import graph_tensor
from schemas import npz_format


@pytest.mark.parametrize("kind", ["tile", "layout"])
def test_schema_is_valid_and_documented(kind):
  schema = graph_tensor.schema(kind)
  tfgnn.validate_schema(schema)
  assert "feed" in schema.edge_sets
  for node_set in schema.node_sets.values():
    for name, feature in node_set.features.items():
      assert feature.description, f"{kind}: {name} has no description"


def _round_trip(kind, gt):
  serialized = graph_tensor.serialize(gt)
  parsed = graph_tensor.parse(kind, serialized)
  assert parsed.spec.is_compatible_with(graph_tensor.graph_spec(kind))
  return parsed


def _assert_same(a, b):
  assert a.context["graph_id"].numpy().tolist() == (
      b.context["graph_id"].numpy().tolist())
  for name, ns in a.node_sets.items():
    np.testing.assert_array_equal(ns.sizes, b.node_sets[name].sizes)
    for f, v in ns.features.items():
      np.testing.assert_array_equal(v.numpy(), b.node_sets[name][f].numpy())
  for name, es in a.edge_sets.items():
    np.testing.assert_array_equal(es.adjacency.source,
                                  b.edge_sets[name].adjacency.source)
    np.testing.assert_array_equal(es.adjacency.target,
                                  b.edge_sets[name].adjacency.target)


def test_tile_example_round_trip(tile_npz):
  g = npz_format.load_graph(tile_npz)
  idx = np.array([2, 0, 1])
  gt = graph_tensor.build(g, "tile:xla:t", idx, g.take_config_feat(idx))
  parsed = _round_trip("tile", gt)
  _assert_same(gt, parsed)
  np.testing.assert_array_equal(parsed.node_sets["config"]["index"], idx)
  np.testing.assert_array_equal(parsed.node_sets["config"]["runtime"],
                                g.config_runtime[idx])
  np.testing.assert_array_equal(parsed.node_sets["config"]["feat"],
                                g.config_feat[idx])
  # npz row [u, v] (u consumes v) becomes a feed edge v -> u.
  np.testing.assert_array_equal(parsed.edge_sets["feed"].adjacency.source,
                                g.edge_index[:, 1])
  assert parsed.context["num_configs"].numpy()[0] == g.num_configs


def test_layout_example_round_trip(layout_npz):
  g = npz_format.load_graph(layout_npz)
  idx = np.array([4, 1])
  feat = g.take_config_feat(idx)
  gt = graph_tensor.build(g, "layout:xla:random:l", idx, feat)
  parsed = _round_trip("layout", gt)
  _assert_same(gt, parsed)
  nc = len(g.node_config_ids)
  assert parsed.node_sets["node_config"].sizes.numpy()[0] == 2 * nc
  np.testing.assert_array_equal(
      parsed.node_sets["node_config"]["feat"].numpy().reshape(2, nc, 18), feat)
  np.testing.assert_array_equal(
      parsed.edge_sets["configures"].adjacency.target.numpy()[nc:],
      g.node_config_ids)
  np.testing.assert_array_equal(
      parsed.edge_sets["part_of"].adjacency.target.numpy(),
      np.repeat([0, 1], nc))


def test_batch_parse(tile_npz):
  g = npz_format.load_graph(tile_npz)
  examples = [graph_tensor.serialize(graph_tensor.build(
      g, "tile:xla:t", np.array([i]), g.take_config_feat(np.array([i]))))
              for i in range(2)]
  batch = graph_tensor.parse("tile", examples)
  assert batch.shape == [2]
