"""Tests for pruning layout graphs to the configurable neighbourhood."""

import dataclasses

import numpy as np

from conversion import prune
from schemas import npz_format
from schemas import opcodes


def _path_graph(n=8, config=(3,)):
  # A chain 0 <- 1 <- ... (node i+1 consumes node i).
  edges = np.array([[i + 1, i] for i in range(n - 1)], dtype=np.int32)
  return npz_format.Graph(
      path="x.npz", kind="layout",
      node_feat=np.arange(n * 140, dtype=np.float32).reshape(n, 140),
      node_opcode=np.arange(n, dtype=np.int32), edge_index=edges,
      config_runtime=np.ones(2, np.int64),
      node_config_ids=np.array(config, np.int32),
      node_splits=np.array([0, 4, n], np.int64))


def test_neighbourhood_grows_by_hops_in_both_directions():
  g = _path_graph()
  assert list(prune.neighbourhood(g, 0)) == [3]
  assert list(prune.neighbourhood(g, 1)) == [2, 3, 4]
  assert list(prune.neighbourhood(g, 2)) == [1, 2, 3, 4, 5]


def test_prune_renumbers_edges_configs_and_splits():
  g = prune.prune(_path_graph(), 1)
  assert g.num_nodes == 3
  np.testing.assert_array_equal(g.node_opcode, [2, 3, 4])
  np.testing.assert_array_equal(g.edge_index, [[1, 0], [2, 1]])
  np.testing.assert_array_equal(g.node_config_ids, [1])
  # Boundaries: [0, 4) and [4, 8) keep nodes 2, 3 and 4.
  np.testing.assert_array_equal(g.node_splits, [0, 2, 3])
  np.testing.assert_array_equal(g.node_feat[0], _path_graph().node_feat[2])


def test_whole_graph_and_tile_are_unchanged(tile_npz):
  g = _path_graph()
  assert prune.prune(g, -1) is g
  t = npz_format.load_graph(tile_npz)
  assert prune.prune(t, 1) is t


def test_pruned_simulated_graph_keeps_every_configurable_node(layout_npz):
  g = npz_format.load_graph(layout_npz)
  p = prune.prune(g, 2)
  assert p.num_nodes <= g.num_nodes
  keep = prune.neighbourhood(g, 2)
  np.testing.assert_array_equal(keep[p.node_config_ids], g.node_config_ids)
  np.testing.assert_array_equal(p.node_opcode, g.node_opcode[keep])
  assert dataclasses.replace(p).num_configs == g.num_configs


def _chain_with_region():
  # 0 -> 1 (conv, configurable) -> 2 add -> 3 tanh -> 4 add (other shape)
  # -> 5 -> 6 -> 7 -> 8, and 9 = add(0, 2): 2 is its second operand.
  g = _path_graph(n=9, config=(1,))
  ops = ["parameter", "convolution", "add", "tanh", "add", "negate",
         "negate", "negate", "negate", "add"]
  feat = np.zeros((10, 140), np.float32)
  feat[:, 21:23] = (8, 128)
  feat[4:9, 21:23] = (4, 128)  # The chain's shape changes at 4.
  edges = np.r_[g.edge_index, [[9, 0], [9, 2]]].astype(np.int32)
  return dataclasses.replace(
      g, node_feat=feat, edge_index=edges,
      node_opcode=np.array([opcodes.opcode_id(o) for o in ops], np.int32))


def test_layout_region_follows_same_shape_elementwise_first_operands():
  g = _chain_with_region()
  # 2 and 3 run in the conv's layout; 4 changes shape; 9 reads the region
  # as its second operand only.
  np.testing.assert_array_equal(np.flatnonzero(prune.layout_regions(g)),
                                [1, 2, 3])


def test_neighbourhood_keeps_regions_whole_then_adds_hops():
  g = _chain_with_region()
  assert list(prune.neighbourhood(g, 0)) == [1, 2, 3]
  assert list(prune.neighbourhood(g, 1)) == [0, 1, 2, 3, 4, 9]


def test_in_graph_pruning_matches_and_is_idempotent(layout_npz):
  """`prune_arrays` (TF ops, what the served `rank` signature runs) gives
  the arrays `prune` writes, and pruning a pruned graph changes nothing
  (clients may prune before sending)."""
  g = npz_format.load_graph(layout_npz)
  for graph in (g, _chain_with_region()):
    for hops in (0, 1, 2):
      p = prune.prune(graph, hops)
      arrays = {"node_feat": graph.node_feat, "node_opcode":
                graph.node_opcode.astype(np.int64), "edge_index":
                graph.edge_index.astype(np.int64), "node_config_ids":
                graph.node_config_ids.astype(np.int64)}
      got = {k: v.numpy() for k, v in prune.prune_arrays(arrays,
                                                         hops).items()}
      np.testing.assert_array_equal(got["node_feat"], p.node_feat)
      np.testing.assert_array_equal(got["node_opcode"], p.node_opcode)
      np.testing.assert_array_equal(got["edge_index"], p.edge_index)
      np.testing.assert_array_equal(got["node_config_ids"],
                                    p.node_config_ids)
      again = prune.prune(p, hops)
      assert again.num_nodes == p.num_nodes
      np.testing.assert_array_equal(again.edge_index, p.edge_index)
      np.testing.assert_array_equal(again.node_config_ids, p.node_config_ids)
