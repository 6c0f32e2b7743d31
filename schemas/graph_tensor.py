"""One graph with a chosen set of K configs as a `tfgnn.GraphTensor`.

The GraphTensors match `tile_graph.pbtxt` / `layout_graph.pbtxt`; they are
what conversion writes (as `tf.Example`, via `tfgnn.write_example`) and what
the trainer and the served model read.
"""

import functools
import os

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from schemas import npz_format

_HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA_FILES = {npz_format.TILE: os.path.join(_HERE, "tile_graph.pbtxt"),
                npz_format.LAYOUT: os.path.join(_HERE, "layout_graph.pbtxt")}


@functools.lru_cache(maxsize=None)
def schema(kind: str) -> tfgnn.GraphSchema:
  """The GraphSchema of "tile" or "layout" examples."""
  return tfgnn.read_schema(SCHEMA_FILES[kind])


@functools.lru_cache(maxsize=None)
def graph_spec(kind: str) -> tfgnn.GraphTensorSpec:
  """The GraphTensorSpec of "tile" or "layout" examples."""
  return tfgnn.create_graph_spec_from_schema_pb(schema(kind))


def _op_node_set(graph: npz_format.Graph) -> tfgnn.NodeSet:
  return tfgnn.NodeSet.from_fields(
      sizes=[graph.num_nodes],
      features={"opcode": graph.node_opcode.astype(np.int32),
                "feat": graph.node_feat.astype(np.float32)})


def _feed(graph: npz_format.Graph) -> tfgnn.EdgeSet:
  # npz row [u, v]: u consumes v, so data flows v -> u.
  edges = graph.edge_index
  return tfgnn.EdgeSet.from_fields(
      sizes=[len(edges)],
      adjacency=tfgnn.Adjacency.from_indices(
          source=("op", edges[:, 1].astype(np.int32)),
          target=("op", edges[:, 0].astype(np.int32))))


def _context(graph: npz_format.Graph, gid: str) -> tfgnn.Context:
  return tfgnn.Context.from_fields(
      features={"graph_id": [gid], "num_configs": [graph.num_configs]})


def build(graph: npz_format.Graph, gid: str, config_index: np.ndarray,
          config_feat: np.ndarray) -> tfgnn.GraphTensor:
  """Builds the example of `graph` with the configs at `config_index`.

  Args:
    graph: The graph (its structure may be pruned).
    gid: Its Kaggle id, `<collection>:<stem>`.
    config_index: [K] indices of the chosen configs in the npz.
    config_feat: Their features: [K, 24] (tile) or [K, nc, 18] (layout), as
      from `graph.take_config_feat(config_index)` or a chunk of
      `graph.iter_config_feat`.

  Returns:
    A scalar GraphTensor matching `graph_spec(graph.kind)`.
  """
  index = np.asarray(config_index, dtype=np.int64)
  k = len(index)
  runtime = graph.config_runtime[index].astype(np.int64)
  node_sets = {"op": _op_node_set(graph)}
  edge_sets = {"feed": _feed(graph)}
  if graph.kind == npz_format.TILE:
    node_sets["config"] = tfgnn.NodeSet.from_fields(
        sizes=[k],
        features={
            "feat": np.asarray(config_feat, np.float32).reshape(k, -1),
            "runtime": runtime,
            "normalizer": graph.config_runtime_normalizers[index].astype(
                np.int64),
            "index": index})
  else:
    nc = len(graph.node_config_ids)
    feat = np.asarray(config_feat, np.float32).reshape(k * nc, -1)
    node_sets["config"] = tfgnn.NodeSet.from_fields(
        sizes=[k], features={"runtime": runtime, "index": index})
    node_sets["node_config"] = tfgnn.NodeSet.from_fields(
        sizes=[k * nc], features={"feat": feat})
    slots = np.arange(k * nc, dtype=np.int32)
    edge_sets["configures"] = tfgnn.EdgeSet.from_fields(
        sizes=[k * nc],
        adjacency=tfgnn.Adjacency.from_indices(
            source=("node_config", slots),
            target=("op", np.tile(graph.node_config_ids.astype(np.int32), k))))
    edge_sets["part_of"] = tfgnn.EdgeSet.from_fields(
        sizes=[k * nc],
        adjacency=tfgnn.Adjacency.from_indices(
            source=("node_config", slots),
            target=("config", (slots // max(nc, 1)).astype(np.int32))))
  return tfgnn.GraphTensor.from_pieces(
      context=_context(graph, gid), node_sets=node_sets, edge_sets=edge_sets)


def serialize(graph_tensor: tfgnn.GraphTensor) -> bytes:
  """The `tf.Example` bytes of a GraphTensor (as conversion writes them)."""
  return tfgnn.write_example(graph_tensor).SerializeToString()


def parse(kind: str, serialized) -> tfgnn.GraphTensor:
  """Parses a batch (or one) of serialized examples of the given kind."""
  serialized = tf.convert_to_tensor(serialized)
  spec = graph_spec(kind)
  if serialized.shape.rank == 0:
    return tfgnn.parse_single_example(spec, serialized)
  return tfgnn.parse_example(spec, serialized)


# The plain-tensor inputs of one graph, by kind: the TpuGraphs npz arrays
# (`export`'s "rank" signature). Opcodes and ids are int64 (JSON integers).
ARRAY_SPECS = {
    npz_format.TILE: {
        "node_feat": tf.TensorSpec([None, 140], tf.float32),
        "node_opcode": tf.TensorSpec([None], tf.int64),
        "edge_index": tf.TensorSpec([None, 2], tf.int64),
        "config_feat": tf.TensorSpec([None, 24], tf.float32),
    },
    npz_format.LAYOUT: {
        "node_feat": tf.TensorSpec([None, 140], tf.float32),
        "node_opcode": tf.TensorSpec([None], tf.int64),
        "edge_index": tf.TensorSpec([None, 2], tf.int64),
        "node_config_ids": tf.TensorSpec([None], tf.int64),
        "node_config_feat": tf.TensorSpec([None, None, 18], tf.float32),
    },
}


def from_arrays(kind: str, arrays: dict) -> tfgnn.GraphTensor:
  """The merged one-graph GraphTensor of plain npz tensors, in TensorFlow.

  What `parse(kind, [serialized])` of `build(graph, ...)` with every config
  gives after `merge_batch_to_components`, with runtimes 0 (unknown), graph
  id "" and config index 0..C-1: so the served model can take the arrays
  of a TpuGraphs graph directly.

  Args:
    kind: "tile" or "layout".
    arrays: Tensors as in `ARRAY_SPECS[kind]`.
  """
  # Sizes and indices in the examples' index dtype (int32).
  n = tf.shape(arrays["node_feat"])[0]
  edges = tf.cast(arrays["edge_index"], tf.int32)
  node_sets = {"op": tfgnn.NodeSet.from_fields(
      sizes=tf.reshape(n, [1]),
      features={"opcode": tf.cast(arrays["node_opcode"], tf.int32),
                "feat": arrays["node_feat"]})}
  # npz row [u, v]: u consumes v, so data flows v -> u.
  edge_sets = {"feed": tfgnn.EdgeSet.from_fields(
      sizes=tf.shape(edges)[:1],
      adjacency=tfgnn.Adjacency.from_indices(source=("op", edges[:, 1]),
                                             target=("op", edges[:, 0])))}
  feat = arrays["config_feat" if kind == npz_format.TILE
               else "node_config_feat"]
  k = tf.shape(feat)[0]
  index = tf.range(tf.cast(k, tf.int64))
  zeros = tf.zeros([k], tf.int64)
  if kind == npz_format.TILE:
    node_sets["config"] = tfgnn.NodeSet.from_fields(
        sizes=tf.reshape(k, [1]),
        features={"feat": feat, "runtime": zeros, "normalizer": zeros,
                  "index": index})
  else:
    ids = tf.cast(arrays["node_config_ids"], tf.int32)
    nc = tf.size(ids)
    rows = tf.reshape(feat, [-1, 18])
    total = tf.shape(rows)[:1]
    slots = tf.range(tf.shape(rows)[0])
    node_sets["config"] = tfgnn.NodeSet.from_fields(
        sizes=tf.reshape(k, [1]), features={"runtime": zeros, "index": index})
    node_sets["node_config"] = tfgnn.NodeSet.from_fields(
        sizes=total, features={"feat": rows})
    edge_sets["configures"] = tfgnn.EdgeSet.from_fields(
        sizes=total, adjacency=tfgnn.Adjacency.from_indices(
            source=("node_config", slots),
            target=("op", tf.tile(ids, tf.reshape(k, [1])))))
    edge_sets["part_of"] = tfgnn.EdgeSet.from_fields(
        sizes=total, adjacency=tfgnn.Adjacency.from_indices(
            source=("node_config", slots),
            target=("config", slots // tf.maximum(nc, 1))))
  return tfgnn.GraphTensor.from_pieces(
      context=tfgnn.Context.from_fields(
          sizes=tf.constant([1], tf.int32),
          features={"graph_id": tf.constant([""]),
                    "num_configs": tf.reshape(tf.cast(k, tf.int64), [1])}),
      node_sets=node_sets, edge_sets=edge_sets)
