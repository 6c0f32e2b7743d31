"""Pruning a layout graph to its configurable nodes' k-hop neighbourhood.

The key trick of the top Kaggle solutions: a layout config only touches the
configurable nodes, so the ops far from them add cost but little signal.
Keeping the configurable nodes, the layout regions they set (see
`layout_regions`) and every op within k hops of those (edges taken in both
directions) shrinks real layout graphs by one to two orders of
magnitude before they are copied once per config.
"""

import dataclasses

import numpy as np
import tensorflow as tf

from schemas import features as F
from schemas import npz_format
from schemas import opcodes


# Hops kept around the layout regions by default: with whole regions, one
# hop adds the ops a config's cost reaches (operands, consumers outside the
# region) at about the size two hops around the configurable ops alone had.
DEFAULT_HOPS = 1

_ELEMENTWISE_IDS = sorted(opcodes.opcode_id(n) for n in opcodes.ELEMENTWISE)
_DIMS = slice(F.SHAPE_DIMS, F.SHAPE_DIMS + F.MAX_RANK)  # Output shape.


def _any_over(mask, edge_from, edge_to, n):
  """[n] bool: nodes with an edge (edge_from -> node) from a masked node."""
  hit = tf.cast(tf.gather(mask, edge_from), tf.int32)
  return tf.math.unsorted_segment_max(hit, edge_to, n) > 0


def region_mask(node_feat, node_opcode, edge_index, node_config_ids):
  """[N] bool tensor: the configurable ops and the ops their layouts spread
  to (TF ops: runs in a SavedModel as in conversion).

  XLA's layout assignment runs an elementwise op in its first operand's
  layout when the shapes match, so a configurable op's output layout sets
  the layout of the elementwise chain after it: its region. What the config
  costs there depends on every op of the region, so regions are kept whole
  (hops alone would cut long chains, and with them the layout a chain's end
  runs in).
  """
  n = tf.shape(node_opcode)[0]
  edges = tf.cast(tf.reshape(edge_index, [-1, 2]), tf.int32)
  consumer, producer = edges[:, 0], edges[:, 1]
  ids = tf.cast(node_config_ids, tf.int32)
  region = tf.math.unsorted_segment_max(tf.ones_like(ids), ids, n) > 0
  # Edges are in operand order: a consumer's first edge is its first operand.
  first_edge = tf.math.unsorted_segment_min(
      tf.range(tf.shape(edges)[0]), consumer, n)
  has = first_edge < tf.shape(edges)[0]
  first = tf.gather(tf.concat([producer, [0]], 0),
                    tf.minimum(first_edge, tf.shape(edges)[0]))  # 0: none.
  dims = node_feat[:, _DIMS]
  elementwise = tf.reduce_any(tf.equal(
      tf.cast(node_opcode, tf.int32)[:, None], _ELEMENTWISE_IDS), axis=1)
  inherits = has & elementwise & tf.reduce_all(
      tf.equal(dims, tf.gather(dims, first)), axis=1)

  def grow(region, _):
    grown = region | (inherits & tf.gather(region, first))
    return grown, tf.reduce_any(grown != region)

  # Each pass extends every chain by one op.
  region, _ = tf.while_loop(lambda _, changed: changed, grow,
                            [region, tf.constant(True)])
  return region


def keep_mask(node_feat, node_opcode, edge_index, node_config_ids, hops):
  """[N] bool tensor: the layout regions and every op within `hops` (int
  or scalar tensor) of them, edges taken in both directions. (`hops` < 0
  keeps the regions alone: callers that mean "no pruning", as `prune`
  does, skip pruning instead.)"""
  n = tf.shape(node_opcode)[0]
  edges = tf.cast(tf.reshape(edge_index, [-1, 2]), tf.int32)
  keep = region_mask(node_feat, node_opcode, edges, node_config_ids)

  def widen(i, keep):
    return i + 1, (keep | _any_over(keep, edges[:, 1], edges[:, 0], n) |
                   _any_over(keep, edges[:, 0], edges[:, 1], n))

  _, keep = tf.while_loop(lambda i, _: i < hops, widen, [0, keep])
  return keep


def prune_arrays(arrays: dict, hops: int) -> dict:
  """A layout graph's TpuGraphs arrays (`node_feat`, `node_opcode`,
  `edge_index`, `node_config_ids`, ...) pruned to `keep_mask`, as tensors:
  kept nodes in their order, edges between them renumbered, and
  `node_config_ids` renumbered; other arrays (configs) unchanged."""
  keep = keep_mask(arrays["node_feat"], arrays["node_opcode"],
                   arrays["edge_index"], arrays["node_config_ids"], hops)
  new_id = tf.cumsum(tf.cast(keep, tf.int32)) - 1
  new_id = tf.where(keep, new_id, -1)
  edges = tf.gather(new_id, tf.cast(tf.reshape(arrays["edge_index"],
                                               [-1, 2]), tf.int32))
  edges = tf.boolean_mask(edges, tf.reduce_all(edges >= 0, axis=1))
  out = dict(arrays)
  out["node_feat"] = tf.boolean_mask(arrays["node_feat"], keep)
  out["node_opcode"] = tf.boolean_mask(arrays["node_opcode"], keep)
  out["edge_index"] = tf.cast(edges, arrays["edge_index"].dtype)
  out["node_config_ids"] = tf.cast(
      tf.gather(new_id, tf.cast(arrays["node_config_ids"], tf.int32)),
      arrays["node_config_ids"].dtype)
  return out


# One trace for every graph (conversion prunes each graph once).
_keep = tf.function(keep_mask, input_signature=[
    tf.TensorSpec([None, None], tf.float32),
    tf.TensorSpec([None], tf.int32), tf.TensorSpec([None, 2], tf.int32),
    tf.TensorSpec([None], tf.int32), tf.TensorSpec([], tf.int32)])


def _graph_keep(graph: npz_format.Graph, hops: int) -> np.ndarray:
  return _keep(graph.node_feat[:, :_DIMS.stop].astype(np.float32),
               graph.node_opcode.astype(np.int32),
               graph.edge_index.reshape(-1, 2).astype(np.int32),
               graph.node_config_ids.astype(np.int32),
               max(hops, 0)).numpy()


def layout_regions(graph: npz_format.Graph) -> np.ndarray:
  """[N] bool: `region_mask` of a graph."""
  return _graph_keep(graph, 0)


def neighbourhood(graph: npz_format.Graph, hops: int) -> np.ndarray:
  """Sorted indices of the layout regions and all ops within `hops`."""
  return np.flatnonzero(_graph_keep(graph, hops))


def prune(graph: npz_format.Graph, hops: int) -> npz_format.Graph:
  """Returns the sub-graph on `neighbourhood(graph, hops)`.

  Node order (topological) is kept; edges between kept nodes are kept and
  renumbered, as are `node_config_ids` and `node_splits`. Configs and
  runtimes are unchanged (config features still stream from `graph.path`).
  Tile graphs and `hops < 0` return the graph unchanged.
  """
  if graph.kind != npz_format.LAYOUT or hops < 0:
    return graph
  keep = neighbourhood(graph, hops)
  new_id = np.full(graph.num_nodes, -1, dtype=np.int64)
  new_id[keep] = np.arange(len(keep))
  edges = new_id[graph.edge_index]
  edges = edges[(edges >= 0).all(axis=1)].astype(np.int32)
  # A boundary b becomes the count of kept nodes before it, so the closing
  # boundary maps to len(keep); emptied computations collapse.
  splits = np.unique(np.searchsorted(keep, graph.node_splits))
  return dataclasses.replace(
      graph,
      node_feat=graph.node_feat[keep],
      node_opcode=graph.node_opcode[keep],
      edge_index=edges.reshape(-1, 2),
      node_config_ids=new_id[graph.node_config_ids].astype(np.int32),
      node_splits=splits.astype(np.int64))
