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
import scipy.sparse

from schemas import npz_format
from schemas import opcodes


# Hops kept around the layout regions by default: with whole regions, one
# hop adds the ops a config's cost reaches (operands, consumers outside the
# region) at about the size two hops around the configurable ops alone had.
DEFAULT_HOPS = 1

_ELEMENTWISE_IDS = np.array(sorted(opcodes.opcode_id(n)
                                    for n in opcodes.ELEMENTWISE))


def layout_regions(graph: npz_format.Graph) -> np.ndarray:
  """[N] bool: the configurable ops and the ops their layouts spread to.

  XLA's layout assignment runs an elementwise op in its first operand's
  layout when the shapes match, so a configurable op's output layout sets
  the layout of the elementwise chain after it: its region. What the config
  costs there depends on every op of the region, so regions are kept whole
  (hops alone would cut long chains, and with them the layout a chain's end
  runs in).
  """
  n = graph.num_nodes
  region = np.zeros(n, dtype=bool)
  region[graph.node_config_ids] = True
  if not len(graph.edge_index):
    return region
  consumer, producer = graph.edge_index[:, 0], graph.edge_index[:, 1]
  # Edges are in operand order: a consumer's first edge is its first operand.
  users, first_edge = np.unique(consumer, return_index=True)
  first = np.full(n, -1, dtype=np.int64)
  first[users] = producer[first_edge]
  dims = graph.node_feat[:, 21:27]
  has = first >= 0
  inherits = np.zeros(n, dtype=bool)
  inherits[has] = (np.isin(graph.node_opcode[has], _ELEMENTWISE_IDS) &
                   (dims[has] == dims[first[has]]).all(axis=1))
  while True:  # Each pass extends every chain by one op.
    grown = region | (inherits & region[np.maximum(first, 0)])
    if (grown == region).all():
      return region
    region = grown


def neighbourhood(graph: npz_format.Graph, hops: int) -> np.ndarray:
  """Sorted indices of the layout regions and all ops within `hops`."""
  n = graph.num_nodes
  keep = layout_regions(graph)
  if hops > 0 and len(graph.edge_index):
    u, v = graph.edge_index[:, 0], graph.edge_index[:, 1]
    adj = scipy.sparse.coo_matrix(
        (np.ones(2 * len(u), dtype=np.int8), (np.r_[u, v], np.r_[v, u])),
        shape=(n, n)).tocsr()
    frontier = keep.copy()
    for _ in range(hops):
      frontier = (adj @ frontier.astype(np.int8)) > 0
      frontier &= ~keep
      if not frontier.any():
        break
      keep |= frontier
  return np.flatnonzero(keep)


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
