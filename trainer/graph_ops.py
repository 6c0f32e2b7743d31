"""Turns parsed examples into the graphs the model runs on.

`expand` takes a *merged* batch of parsed examples (one component per
example, as `merge_batch_to_components` gives) and returns the model's input:

* every graph gets a `rev` edge set, the `feed` edges reversed, so message
  passing runs along and against the data flow;
* tile examples keep one component per example: configs join at the graph
  context, so the graph is encoded once for all its configs;
* layout examples for a late-join model: see `config_rows`;
* layout examples for an early-join model become one component per config: a copy of the (pruned)
  graph whose configurable ops carry that config's 18 features in `cfg`
  (early join), since a layout config changes how every op around it runs,
  and in `phys` what that layout means physically (see
  `layout_features`).

Each component (layout) or config node (tile) also gets `example` (its
example in the batch) and `slot` (1 + its position in the example; padding
gets 0), which place scores into the [batch, K] matrix of the ranking loss.
Everything is index arithmetic on tensors, so it runs in tf.data, in the
serving signature, and on any device.
"""

import tensorflow as tf
import tensorflow_gnn as tfgnn

from trainer import batch_index
from trainer import config_rows
from trainer import hparams
from trainer import layout_features
from trainer import tile_features


def _with_rev(feed: tfgnn.EdgeSet) -> dict:
  adj = feed.adjacency
  rev = tfgnn.EdgeSet.from_fields(
      sizes=feed.sizes,
      adjacency=tfgnn.Adjacency.from_indices(
          source=("op", adj.target), target=("op", adj.source)))
  return {"feed": tfgnn.EdgeSet.from_fields(sizes=feed.sizes,
                                            adjacency=adj), "rev": rev}


def expand_tile(graph: tfgnn.GraphTensor) -> tfgnn.GraphTensor:
  """Tile: adds reversed edges and config slots; one component per example."""
  config = graph.node_sets["config"]
  example, slot = batch_index.slots(config.sizes)
  return tfgnn.GraphTensor.from_pieces(
      context=tfgnn.Context.from_fields(sizes=graph.context.sizes),
      node_sets={
          "op": tfgnn.NodeSet.from_fields(
              sizes=graph.node_sets["op"].sizes,
              features={k: graph.node_sets["op"][k]
                        for k in ("opcode", "feat")}),
          "config": tfgnn.NodeSet.from_fields(
              sizes=config.sizes,
              features={"feat": config["feat"],
                        "phys": tile_features.tile_config_features(graph),
                        "example": example, "slot": slot}),
      },
      edge_sets=_with_rev(graph.edge_sets["feed"]))


def expand_layout(graph: tfgnn.GraphTensor) -> tfgnn.GraphTensor:
  """Layout: one component per config, each a copy of its example's graph.

  Only what differs between configs is copied. The config-free op features
  stay once per example in `source_op` (held by the example's first
  component); each op copy links to its original by a `copies` edge, so the
  model encodes them once for all K configs. The config's 18 features stay
  on `node_config` nodes (one per configurable op of the copy), linked to
  their op copy by a `configures` edge (the early join). Each op copy
  carries `phys`: what the config's layouts mean physically there.
  """
  op = graph.node_sets["op"]
  n = tf.cast(op.sizes, tf.int32)  # [E]
  k = tf.cast(graph.node_sets["config"].sizes, tf.int32)  # [E]
  num_configs = tf.reduce_sum(k)
  comp_example, slot = batch_index.slots(k)  # [C]
  op_off_old = batch_index.exclusive_cumsum(n)
  n_new = tf.gather(n, comp_example)
  op_off_new = batch_index.exclusive_cumsum(n_new)
  old_op = batch_index.ragged_ranges(tf.gather(op_off_old, comp_example), n_new)

  feed = graph.edge_sets["feed"]
  m = tf.cast(feed.sizes, tf.int32)
  m_new = tf.gather(m, comp_example)
  old_edge = batch_index.ragged_ranges(tf.gather(batch_index.exclusive_cumsum(m), comp_example),
                            m_new)
  edge_comp = batch_index.segment_ids(m_new)
  shift = tf.gather(op_off_new, edge_comp) - tf.gather(
      op_off_old, tf.gather(comp_example, edge_comp))
  src = tf.gather(tf.cast(feed.adjacency.source, tf.int32), old_edge) + shift
  tgt = tf.gather(tf.cast(feed.adjacency.target, tf.int32), old_edge) + shift

  # Early join: each node_config's op copy.
  nc_config = tf.cast(graph.edge_sets["part_of"].adjacency.target, tf.int32)
  nc_op = tf.cast(graph.edge_sets["configures"].adjacency.target, tf.int32)
  new_op = nc_op - tf.gather(op_off_old, tf.gather(comp_example, nc_config)
                             ) + tf.gather(op_off_new, nc_config)
  nc_feat = graph.node_sets["node_config"]["feat"]
  with tf.control_dependencies([config_rows.check_config_values(nc_feat)]):
    nc_feat = tf.identity(nc_feat)
  values = tf.concat([nc_feat, tf.ones_like(nc_feat[:, :1])], axis=-1)
  total_new = tf.reduce_sum(n_new)
  cfg = tf.scatter_nd(new_op[:, None], values,
                      tf.stack([total_new, layout_features.CFG_WIDTH]))

  # The source ops of example e sit in its first component (slot 1), in
  # example order; examples without configs have no component and drop out.
  first = tf.boolean_mask(comp_example, tf.equal(slot, 1))  # [E'] examples
  source_rows = batch_index.ragged_ranges(tf.gather(op_off_old, first),
                               tf.gather(n, first))
  source_off = tf.scatter_nd(first[:, None], batch_index.exclusive_cumsum(
      tf.gather(n, first)), tf.shape(n))  # [E]
  node_comp = batch_index.segment_ids(n_new)
  source_of_copy = (tf.gather(source_off, tf.gather(comp_example, node_comp))
                    + tf.range(total_new) - tf.gather(op_off_new, node_comp))
  new_feat = tf.gather(op["feat"], old_op)
  new_opcode = tf.gather(op["opcode"], old_op)
  producers = layout_features.operand_producers(total_new, src, tgt)
  dims, current = layout_features.op_shapes(new_feat)
  physical = layout_features.physical_layout_features(dims, current, cfg,
                                                      producers)
  # Under every propagation rule: the model learns the chip's.
  propagated = [layout_features.propagated_layout_features(
      dims, current, new_opcode, cfg, producers, rule)
                for rule in layout_features.PROPAGATION_RULES]
  phys, cost_scale = layout_features.under_rules(
      physical, propagated, dims, new_opcode, cfg, producers,
      layout_features.size_units(dims, n_new))
  feed_new = tfgnn.EdgeSet.from_fields(
      sizes=m_new,
      adjacency=tfgnn.Adjacency.from_indices(source=("op", src),
                                             target=("op", tgt)))
  edge_sets = _with_rev(feed_new)
  edge_sets["copies"] = tfgnn.EdgeSet.from_fields(
      sizes=n_new, adjacency=tfgnn.Adjacency.from_indices(
          source=("source_op", source_of_copy),
          target=("op", tf.range(total_new))))
  # node_configs per config (config-major): sizes of both the node set and
  # its edges.
  nc_sizes = tf.math.bincount(nc_config, minlength=num_configs,
                              maxlength=num_configs)
  edge_sets["configures"] = tfgnn.EdgeSet.from_fields(
      sizes=nc_sizes,
      adjacency=tfgnn.Adjacency.from_indices(
          source=("node_config", tf.range(tf.size(nc_config))),
          target=("op", new_op)))
  return tfgnn.GraphTensor.from_pieces(
      context=tfgnn.Context.from_fields(
          sizes=tf.ones([num_configs], tf.int32),
          features={"example": comp_example, "slot": slot}),
      node_sets={
          "op": tfgnn.NodeSet.from_fields(
              sizes=n_new,
              features={"phys": phys, "cost_scale": cost_scale}),
          "source_op": tfgnn.NodeSet.from_fields(
              sizes=tf.where(tf.equal(slot, 1), n_new, 0),
              features={"opcode": tf.gather(op["opcode"], source_rows),
                        "feat": tf.gather(op["feat"], source_rows)}),
          "node_config": tfgnn.NodeSet.from_fields(
              sizes=nc_sizes, features={"feat": nc_feat}),
      },
      edge_sets=edge_sets)


def expand(kind: str, graph: tfgnn.GraphTensor,
           join: str = hparams.JOINS[0]) -> tfgnn.GraphTensor:
  """The model input of a merged batch of "tile" or "layout" examples, for
  a layout model of the given `join` (see `hparams.JOINS`)."""
  if kind == "tile":
    return expand_tile(graph)
  if join == "late":
    return config_rows.expand_layout_late(graph)
  return expand_layout(graph)
