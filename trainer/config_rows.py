"""Late-join layout input: the graph once, and per config only what it changes.

A layout config sets the layouts of the configurable ops; XLA carries an
op's output layout down the same-shape elementwise chain after it
(`layout_features.effective_layouts`), and a copy runs where a reader wants
another layout than its operand has. So the features of an op can depend on
the config only if the op is

* in `L`: a configurable op or within PROPAGATION_STEPS of one along such a
  chain (its own layout changes), or
* a reader of an op in `L` (as first or second operand: a copy may appear).

`R` is those ops; every other op has the same features under every config,
and adds the same amount to every config's score. `expand_layout_late`
returns the merged batch with:

* "op": the graph's ops once per example (in its first config's component),
  with their config-free features and `phys` under the compiler default,
  and the `feed`/`rev` edges: the message passing runs here once, shared by
  every config;
* "config_op": one row per (config, op of R), with `phys`, `cost_scale` and
  `cfg` exactly as the early join computes them for that op copy (see
  `graph_ops.expand_layout`), linked to its op by a `reads` edge.

The row features are computed on R and the operands R reads, with the
layouts of ops outside L taken from the whole graph: per config the cost
scales with R, not with the graph.
"""

import tensorflow as tf
import tensorflow_gnn as tfgnn

from trainer import batch_index
from trainer import layout_features as lf


def _num(sizes):
  return tf.reduce_sum(tf.cast(sizes, tf.int32))


def _count(mask, group, groups):
  """Per group, the number of True items (items grouped by `group`)."""
  return tf.math.unsorted_segment_sum(tf.cast(mask, tf.int32), group, groups)


def changed_ops(configurable, heads, producers):
  """Masks (L, R, S) over ops: layout may change; features may change; R
  and the operands it reads (what computing R's features needs).

  An op's layout changes with the config iff its layout head
  (`layout_features.layout_heads`) is configurable.
  """
  n = tf.shape(configurable)[0]
  changes = tf.gather(configurable, heads)
  reads = changes
  for p in producers:
    reads |= (p >= 0) & tf.gather(changes, tf.maximum(p, 0))
  needed = reads
  for p in producers:
    read = tf.cast(reads & (p >= 0), tf.int32)
    needed |= tf.math.unsorted_segment_max(read, tf.maximum(p, 0), n) > 0
  return changes, reads, needed


def expand_layout_late(graph: tfgnn.GraphTensor) -> tfgnn.GraphTensor:
  """The late-join model input of a merged batch of layout examples.

  One component per config (as the early join), so scores place the same
  way; each example's ops live in its first config's component.
  """
  op = graph.node_sets["op"]
  n = tf.cast(op.sizes, tf.int32)  # [E]
  k = tf.cast(graph.node_sets["config"].sizes, tf.int32)  # [E]
  num_examples = tf.size(n)
  total = _num(n)
  op_example = batch_index.segment_ids(n)
  feat, opcode = op["feat"], op["opcode"]
  dims, current = lf.op_shapes(feat)
  feed = graph.edge_sets["feed"]
  src = tf.cast(feed.adjacency.source, tf.int32)
  tgt = tf.cast(feed.adjacency.target, tf.int32)
  producers = lf.operand_producers(total, src, tgt)
  nc_op = tf.cast(graph.edge_sets["configures"].adjacency.target, tf.int32)
  nc_config = tf.cast(graph.edge_sets["part_of"].adjacency.target, tf.int32)
  nc_feat = graph.node_sets["node_config"]["feat"]
  configurable = tf.math.unsorted_segment_max(
      tf.ones_like(nc_op), nc_op, total) > 0
  # The compiler default (every config value -1) on every op, once.
  flag = tf.cast(configurable, tf.float32)[:, None]
  default = tf.concat([-tf.ones([total, lf.CFG_WIDTH - 1]), flag], axis=1)
  heads = lf.layout_heads(lf.inheriting(dims, opcode, default, producers),
                          producers)
  changes, reads, needed = changed_ops(configurable, heads, producers)
  unit = lf.size_units(dims, n)
  static_layout = lf.effective_layouts(dims, current, opcode, default,
                                       producers, heads=heads)
  static_phys = tf.concat([
      lf.physical_layout_features(dims, current, default, producers),
      lf.propagated_layout_features(dims, current, opcode, default,
                                    producers)], axis=1)

  # Rows: for each config, the needed ops of its example.
  comp_example, slot = batch_index.slots(k)  # [C]
  num_configs = tf.size(comp_example)
  needed_ops = tf.cast(tf.where(needed)[:, 0], tf.int32)  # Sorted.
  s = _count(needed, op_example, num_examples)  # [E]
  s_off = batch_index.exclusive_cumsum(s)
  # Position of a needed op among its example's needed ops.
  local = tf.cumsum(tf.cast(needed, tf.int32)) - 1 - tf.gather(s_off,
                                                              op_example)
  row_sizes = tf.gather(s, comp_example)
  row_off = batch_index.exclusive_cumsum(row_sizes)
  row_config = batch_index.segment_ids(row_sizes)
  row_op = tf.gather(needed_ops, batch_index.ragged_ranges(
      tf.gather(s_off, comp_example), row_sizes))
  total_rows = tf.size(row_op)

  def row_of(ops, configs):
    return tf.gather(row_off, configs) + tf.gather(local, ops)

  row_producers = []
  for p in producers:
    rp = tf.gather(p, row_op)
    ok = (rp >= 0) & tf.gather(needed, tf.maximum(rp, 0))
    row_producers.append(tf.where(
        ok, row_of(tf.maximum(rp, 0), row_config), -1))
  # Rows of configurable ops take their config's values (cfg) and chosen
  # layouts (physical); other rows zeros. Placed by an index and a gather:
  # several times faster than scatter_nd of the wide rows on CPU.
  nc_cfg = tf.concat([nc_feat, tf.ones_like(nc_feat[:, :1])], axis=-1)
  nc_of_row = tf.math.unsorted_segment_max(
      tf.range(1, tf.size(nc_op) + 1), row_of(nc_op, nc_config), total_rows)
  nc_of_row = tf.maximum(nc_of_row, 0)  # 0: not configurable.
  at_rows = lambda x, rows=nc_of_row: tf.gather(tf.pad(x, [[1, 0], [0, 0]]),
                                                rows)
  cfg = at_rows(nc_cfg)
  r_dims = tf.gather(dims, row_op)
  r_current = tf.gather(current, row_op)
  r_opcode = tf.gather(opcode, row_op)
  row_changes = tf.gather(changes, row_op)
  fixed = (~row_changes, tf.gather(static_layout, row_op))
  # A changing op's head changes too (it is configurable): in its rows.
  row_heads = tf.where(row_changes,
                       row_of(tf.gather(heads, row_op), row_config),
                       tf.range(total_rows))
  # Non-zero at configurable ops only: computed on the config's values
  # there, with shapes from the graph.
  operands = [(tf.gather(dims, tf.maximum(p, 0)), tf.gather(
      current, tf.maximum(p, 0)), p >= 0) for p in (
          tf.gather(q, nc_op) for q in producers)]
  chosen = lf.chosen_layout_features(
      tf.gather(dims, nc_op), tf.gather(current, nc_op), operands, nc_cfg)
  # Features of the R rows only; the other rows are their operands.
  keep = tf.gather(reads, row_op)
  kept = tf.cast(tf.where(keep)[:, 0], tf.int32)
  propagated = lf.propagated_layout_features(
      r_dims, r_current, r_opcode, cfg, row_producers, fixed, row_heads, kept)
  physical = at_rows(chosen, tf.gather(nc_of_row, kept))
  cfg = tf.gather(cfg, kept)
  cost = lf.cost_scales(r_dims, tf.gather(r_opcode, kept), cfg, physical,
                        propagated, row_producers,
                        tf.gather(unit, tf.gather(row_op, kept)), kept)
  row_op = tf.gather(row_op, kept)
  rows_per_config = tf.gather(_count(reads, op_example, num_examples),
                              comp_example)

  # Ops (and their edges) of examples without configs have no component.
  op_kept = tf.gather(k > 0, op_example)
  new_index = tf.cumsum(tf.cast(op_kept, tf.int32)) - 1
  edge_kept = tf.gather(op_kept, src)
  m = _count(edge_kept, tf.gather(op_example, src), num_examples)
  first_config = tf.equal(slot, 1)
  in_first = lambda per_example: tf.where(
      first_config, tf.gather(per_example, comp_example), 0)
  kept_src = tf.gather(new_index, tf.boolean_mask(src, edge_kept))
  kept_tgt = tf.gather(new_index, tf.boolean_mask(tgt, edge_kept))
  adjacency = lambda a, b: tfgnn.Adjacency.from_indices(source=("op", a),
                                                        target=("op", b))
  keep_op = lambda x: tf.boolean_mask(x, op_kept)
  return tfgnn.GraphTensor.from_pieces(
      context=tfgnn.Context.from_fields(
          sizes=tf.ones([num_configs], tf.int32),
          features={"example": comp_example, "slot": slot,
                    "ops": tf.cast(tf.gather(n, comp_example), tf.float32)}),
      node_sets={
          "op": tfgnn.NodeSet.from_fields(
              sizes=in_first(n),
              features={"feat": keep_op(feat), "opcode": keep_op(opcode),
                        "phys": keep_op(static_phys)}),
          "config_op": tfgnn.NodeSet.from_fields(
              sizes=rows_per_config,
              features={
                  "phys": tf.concat([physical, propagated], 1),
                  "cost_scale": cost, "cfg": cfg}),
      },
      edge_sets={
          "feed": tfgnn.EdgeSet.from_fields(
              sizes=in_first(m), adjacency=adjacency(kept_src, kept_tgt)),
          "rev": tfgnn.EdgeSet.from_fields(
              sizes=in_first(m), adjacency=adjacency(kept_tgt, kept_src)),
          "reads": tfgnn.EdgeSet.from_fields(
              sizes=rows_per_config,
              adjacency=tfgnn.Adjacency.from_indices(
                  source=("op", tf.gather(new_index, row_op)),
                  target=("config_op", tf.range(tf.size(row_op))))),
      })
