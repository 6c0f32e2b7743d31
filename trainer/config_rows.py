"""Late-join layout input: the graph once, and per config only what it changes.

A layout config sets the layouts of the configurable ops; XLA carries an
op's output layout down the same-shape elementwise chain after it (each op
runs in its layout head's layout, `layout_features.layout_heads`), and a
copy runs where a reader wants another layout than its operand has. So the
features of an op can depend on the config only if the op is

* in `L`: its layout head is configurable (its own layout changes), or
* a reader of an op in `L` (as first or second operand: a copy may appear).

`R` is those ops; every other op has the same features under every config
and adds the same amount to every config's score. The features come under
each propagation rule (`layout_features.PROPAGATION_RULES`); `L` and `R`
are those of XLA's, which lets the most ops inherit, so they hold every
rule's.

The features of an op of `R` under a config depend on that config's values
at three layout heads at most: its own (all 18 values if the op is
configurable, else its head's output layout) and its two operands' heads
(their output layouts). Configs that agree there give the op the same
features, so each op gets one *row* per distinct combination among the
call's configs, and each config links to its op's row. On simulated
graphs a configurable op sees ~17 distinct layouts per 1,000 random
configs, so rows are far fewer than (config, op) pairs: per pair the cost
is a few integer index ops; the features and the model's readout run on
rows only.

`expand_layout_late` returns the merged batch with:

* "op": the graph's ops once per example (in its first config's component),
  with their config-free features and `phys` under the compiler default,
  and the `feed`/`rev` edges: the message passing runs here once, shared by
  every config;
* "config_op": the rows, each with `phys`, `cost_scale` and `cfg` exactly
  as the early join computes them for that op under those configs (see
  `graph_ops.expand_layout`), linked to its op by a `reads` edge and held
  by the component of the first config that has it;
* "config": one node per component (config), and `adds_to` edges from each
  (config, op of R) pair's row to its config: a config's score sums its
  rows along them.
"""

import tensorflow as tf
import tensorflow_gnn as tfgnn

from schemas import features as F
from trainer import batch_index
from trainer import layout_features as lf

# A config value is -1 (compiler's choice) or a dimension index: shifted by
# one it is a digit of base _BASE, and a group of MAX_RANK values (one
# layout) one integer below _ABSENT. _ABSENT stands for a config without a
# row for the op (which the early join reads as "not configurable").
_BASE = F.MAX_RANK + 1
_ABSENT = _BASE ** F.MAX_RANK
_CODES = _ABSENT + 1
_GROUPS = (F.LAYOUT_OUTPUT, F.LAYOUT_INPUT, F.LAYOUT_KERNEL)
assert _GROUPS == tuple(range(0, F.LAYOUT_CONFIG_FEATURES, F.MAX_RANK))
# Row keys are exact int64 below this; above, rows are not deduplicated.
_MAX_KEY = 2.0 ** 62


def _num(sizes):
  return tf.reduce_sum(tf.cast(sizes, tf.int32))


def _count(mask, group, groups):
  """Per group, the number of True items (items grouped by `group`)."""
  return tf.math.unsorted_segment_sum(tf.cast(mask, tf.int32), group, groups)


def changed_ops(configurable, heads, producers):
  """Masks (L, R) over ops: layout may change; features may change.

  An op's layout changes with the config iff its layout head
  (`layout_features.layout_heads`) is configurable.
  """
  changes = tf.gather(configurable, heads)
  reads = changes
  for p in producers:
    reads |= (p >= 0) & tf.gather(changes, tf.maximum(p, 0))
  return changes, reads


def check_config_values(nc_feat: tf.Tensor) -> tf.Tensor:
  """Asserts that config values are -1 or a dimension index (the format's
  rule; row keys rely on it): InvalidArgumentError naming the field."""
  valid = tf.clip_by_value(tf.round(nc_feat), -1.0, F.MAX_RANK - 1.0)
  return tf.debugging.assert_equal(
      tf.reduce_all(tf.equal(valid, nc_feat)), True,
      message=f"node_config_feat: expected -1 or a dimension index "
      f"0..{F.MAX_RANK - 1}")


def _layout_codes(nc_feat):
  """[NC, 3] int64: each node config's output, input and kernel layouts,
  one integer each (< _ABSENT). Elementwise float32 (no matmul: GPUs may
  run those in TF32) is exact: every partial sum is an integer < 2**24."""
  weights = tf.constant([float(_BASE ** j) for j in range(F.MAX_RANK)])
  groups = tf.reshape(nc_feat + 1.0, [-1, len(_GROUPS), F.MAX_RANK])
  return tf.cast(tf.reduce_sum(groups * weights, axis=2), tf.int64)


def _layouts_of_codes(codes):
  """[U, 6] float32 minor_to_major layouts of `_layout_codes` values
  (_ABSENT: all -1)."""
  powers = tf.constant([_BASE ** j for j in range(F.MAX_RANK)], tf.int64)
  return tf.cast(codes[:, None] // powers % _BASE - 1, tf.float32)


def _unique(keys, bound):
  """tf.unique of int64 `keys`, all in [0, bound): hashed as int32 where they
  fit (~30% faster on CPU), the int64 values and indices either way."""
  def narrow():
    y, idx = tf.unique(tf.cast(keys, tf.int32))
    return tf.cast(y, tf.int64), idx
  return tf.cond(tf.cast(bound, tf.float64) <= 2.0 ** 31,
                 narrow, lambda: tuple(tf.unique(keys)))


def _present(ids, size):
  """[size] bool: which of 0..size-1 occur in int32 `ids` (bincount, with a
  histogram per thread: ~15x faster on CPU than a segment max)."""
  return tf.math.bincount(ids, minlength=size, maxlength=size,
                          binary_output=True) > 0


# Cells (column x distinct layout) up to which `_local_ids` counts in a
# dense table (a few MB) instead of hashing every entry.
_DENSE_CELLS = 1 << 24


def _local_ids(column, codes, columns):
  """Dense ids of codes within their column.

  Args:
    column: [T] int32 column of each entry (< columns).
    codes: [T] int64 in [0, _CODES).
    columns: Number of columns.

  Returns:
    [T] int64 rank of each entry's code among its column's distinct codes;
    [columns] int64 the number of distinct codes of each column; and the
    distinct codes, [D] int64, ordered by column then rank.
  """
  # A call holds few distinct layouts (tens: the permutations of a few
  # ranks), so (column, layout) cells usually fit a dense table: counting
  # in it halves the time of tf.unique over every entry.
  seen = _present(tf.cast(codes, tf.int32), _CODES)
  layouts = tf.reduce_sum(tf.cast(seen, tf.int32))

  def dense():
    layout = tf.gather(tf.cumsum(tf.cast(seen, tf.int32)) - 1, codes)
    cell = column * layouts + layout
    held = tf.reshape(_present(cell, columns * layouts), [columns, layouts])
    rank = tf.cumsum(tf.cast(held, tf.int32), axis=1) - 1
    at = tf.where(held)  # Column-major, then by code: the ranks' order.
    return (tf.cast(tf.gather(tf.reshape(rank, [-1]), cell), tf.int64),
            tf.reduce_sum(tf.cast(held, tf.int64), axis=1),
            tf.gather(tf.where(seen)[:, 0], at[:, 1]))

  def hashed():
    distinct, uid = _unique(tf.cast(column, tf.int64) * _CODES + codes,
                            tf.cast(columns, tf.float64) * _CODES)
    owner = tf.cast(distinct // _CODES, tf.int32)
    count = tf.math.unsorted_segment_sum(tf.ones_like(owner), owner, columns)
    order = tf.argsort(owner, stable=True)
    rank = tf.range(tf.size(owner)) - tf.gather(
        batch_index.exclusive_cumsum(count), tf.gather(owner, order))
    rank = tf.scatter_nd(order[:, None], rank, tf.shape(owner))
    return (tf.cast(tf.gather(rank, uid), tf.int64), tf.cast(count, tf.int64),
            tf.gather(distinct % _CODES, order))

  cells = tf.cast(columns, tf.float64) * tf.cast(layouts, tf.float64)
  return tf.cond(cells <= _DENSE_CELLS, dense, hashed)


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
  with tf.control_dependencies([check_config_values(nc_feat)]):
    nc_feat = tf.identity(nc_feat)
  configurable = _present(nc_op, total)
  # The compiler default (every config value -1) on every op, once.
  flag = tf.cast(configurable, tf.float32)[:, None]
  default = tf.concat([-tf.ones([total, lf.CFG_WIDTH - 1]), flag], axis=1)
  # Features come under every propagation rule (the model learns the
  # chip's). The first lets the most ops inherit: another rule's heads are
  # its heads or ops whose layout no config changes, so its L and R hold
  # the other rules' and its row keys tell their features apart.
  rule_heads = [lf.layout_heads(lf.inheriting(dims, opcode, default,
                                              producers, rule), producers)
                for rule in lf.PROPAGATION_RULES]
  heads = rule_heads[0]
  changes, reads = changed_ops(configurable, heads, producers)
  unit = lf.size_units(dims, n)
  static_layouts = [lf.effective_layouts(dims, current, opcode, default,
                                         producers, heads=h)
                    for h in rule_heads]
  static_phys = tf.concat(
      [lf.physical_layout_features(dims, current, default, producers)] +
      [lf.propagated_layout_features(dims, current, opcode, default,
                                     producers, rule)
       for rule in lf.PROPAGATION_RULES], axis=1)

  # The config table: one slot per (config, configurable op of its
  # example), holding the node config row (-1: the config has none). A
  # configurable op's column is its index among all configurable ops.
  comp_example, slot = batch_index.slots(k)  # [C]
  num_configs = tf.size(comp_example)
  column = tf.cumsum(tf.cast(configurable, tf.int32)) - 1  # [N]
  columns = _num(tf.cast(configurable, tf.int32))
  per_example = _count(configurable, op_example, num_examples)
  first_column = batch_index.exclusive_cumsum(per_example)
  table_sizes = tf.gather(per_example, comp_example)
  table_base = batch_index.exclusive_cumsum(table_sizes)
  # Slot of (config c, column j) = shift[c] + j.
  shift = table_base - tf.gather(first_column, comp_example)
  table_size = _num(table_sizes)
  nc_slot = tf.gather(shift, nc_config) + tf.gather(column, nc_op)
  table = tf.math.unsorted_segment_max(
      tf.range(1, tf.size(nc_op) + 1), nc_slot, table_size)
  table = tf.maximum(table, 0) - 1
  table_column = tf.range(table_size) - tf.gather(
      shift, batch_index.segment_ids(table_sizes))

  # Digits of the row keys, per slot: the output layout's id (for heads)
  # and the whole config's (for configurable ops), dense per column.
  codes = tf.where(table[:, None] >= 0,
                   tf.gather(_layout_codes(nc_feat), tf.maximum(table, 0)),
                   tf.cast(_ABSENT, tf.int64))
  ids, counts, distinct = _local_ids(
      tf.reshape(table_column[:, None] * 3 + tf.range(3)[None, :], [-1]),
      tf.reshape(codes, [-1]), columns * 3)
  ids = tf.reshape(ids, [-1, 3])
  # Each distinct (configurable op, layout group, layout)'s physical
  # features (`layout_features.chosen_layout_features`), computed once:
  # rows gather them.
  entry_base = batch_index.exclusive_cumsum(tf.cast(counts, tf.int32))
  owner = batch_index.segment_ids(counts)
  owner_op = tf.gather(tf.cast(tf.where(configurable)[:, 0], tf.int32),
                       owner // 3)
  tensor = tf.stack([owner_op] + [tf.gather(p, owner_op) for p in producers],
                    axis=1)
  tensor = tf.gather(tensor, owner % 3, batch_dims=1)  # -1: no operand.
  entry_layout = _layouts_of_codes(distinct)
  entry_phys = lf.layout_phys(
      tf.gather(dims, tf.maximum(tensor, 0)),
      tf.gather(current, tf.maximum(tensor, 0)),
      entry_layout) * tf.cast(tensor >= 0, tf.float32)[:, None]
  counts = tf.reshape(counts, [-1, 3])
  out_count = counts[:, 0]
  whole_count = counts[:, 0] * counts[:, 1] * counts[:, 2]
  column_of_slot = lambda x: tf.gather(x, table_column)
  whole = ids[:, 0] + column_of_slot(out_count) * (
      ids[:, 1] + column_of_slot(counts[:, 1]) * ids[:, 2])
  # Index 2 * slot (+1 for the whole config); the last entry: no digit.
  digits = tf.concat([tf.reshape(tf.stack([ids[:, 0], whole], 1), [-1]),
                      [0]], 0)
  radices = tf.concat([tf.reshape(tf.stack([out_count, whole_count], 1),
                                  [-1]), [1]], 0)

  # Per op of R, where its three digits come from (2 * column + whole, -1:
  # none) and their radices; each op's keys get a range of their own.
  r_ops = tf.cast(tf.where(reads)[:, 0], tf.int32)  # Sorted, by example.
  head_column = tf.gather(column, heads)
  sources = [tf.where(
      tf.gather(configurable, r_ops), 2 * tf.gather(column, r_ops) + 1,
      tf.where(tf.gather(changes, r_ops),
               2 * tf.gather(head_column, r_ops), -1))]
  for p in producers:
    rp = tf.gather(p, r_ops)
    ok = (rp >= 0) & tf.gather(changes, tf.maximum(rp, 0))
    sources.append(tf.where(
        ok, 2 * tf.gather(head_column, tf.maximum(rp, 0)), -1))
  radix = [tf.gather(radices, tf.where(s >= 0, s, tf.size(radices) - 1))
           for s in sources]
  span = radix[0] * radix[1] * radix[2]
  offset = batch_index.exclusive_cumsum(span)
  # Checked in float64: the int64 products may have wrapped.
  as_float = [tf.cast(r, tf.float64) for r in radix]
  key_bound = tf.reduce_sum(as_float[0] * as_float[1] * as_float[2])
  exact = key_bound < _MAX_KEY

  # Pairs: for each config, the ops of R of its example (config-major).
  per_example_r = _count(reads, op_example, num_examples)
  pairs_per_config = tf.gather(per_example_r, comp_example)
  pair_config = batch_index.segment_ids(pairs_per_config)
  pair_r = batch_index.ragged_ranges(
      tf.gather(batch_index.exclusive_cumsum(per_example_r), comp_example),
      pairs_per_config)  # Position in r_ops.
  pair_shift = 2 * tf.gather(shift, pair_config)
  none = tf.size(digits) - 1

  def digit(source):
    s = tf.gather(source, pair_r)
    return tf.gather(digits, tf.where(s >= 0, pair_shift + s, none))

  key = tf.gather(offset, pair_r) + digit(sources[0]) + tf.gather(
      radix[0], pair_r) * (digit(sources[1]) + tf.gather(
          radix[1], pair_r) * digit(sources[2]))
  num_pairs = tf.size(pair_r)
  key, key_bound = tf.cond(
      exact, lambda: (key, key_bound),
      lambda: (tf.range(tf.cast(num_pairs, tf.int64)),
               tf.cast(num_pairs, tf.float64)))
  _, row_of_pair = _unique(key, key_bound)
  num_rows = tf.reduce_max(tf.concat([row_of_pair, [-1]], 0)) + 1
  # Each row's first pair: rows are numbered in pair order, so the rows of
  # a config follow those of the configs before it.
  first_pair = tf.math.unsorted_segment_min(tf.range(num_pairs), row_of_pair,
                                            num_rows)
  row_op = tf.gather(r_ops, tf.gather(pair_r, first_pair))
  row_config = tf.gather(pair_config, first_pair)

  # The rows' features, from the config table at their first config.
  nc_cfg = tf.pad(tf.concat([nc_feat, tf.ones_like(nc_feat[:, :1])], -1),
                  [[1, 0], [0, 0]])  # Row 0: no node config.
  row_shift = tf.gather(shift, row_config)

  def cfg_at(ops):  # The config's values at configurable ops (else 0).
    at = tf.gather(table, tf.maximum(row_shift + tf.gather(column, ops), 0))
    return tf.gather(nc_cfg, tf.where(tf.gather(configurable, ops), at + 1,
                                      0))

  def layout_of(ops, shift, rule):  # Effective layouts under the config
    # at `shift`. A changing op runs in its (configurable) head's output
    # layout: the chosen one, read from the distinct layouts; else the
    # head's current.
    h = tf.gather(rule_heads[rule], ops)
    moves = tf.gather(configurable, h)
    h_column = tf.where(moves, tf.gather(column, h), 0)
    out_id = tf.gather(ids[:, 0], tf.maximum(shift + h_column, 0))
    chosen = tf.gather(entry_layout, tf.gather(entry_base, 3 * h_column) +
                       tf.cast(out_id, tf.int32))
    own = lf.chosen_or_current(chosen, tf.gather(current, h))
    return tf.where(moves[:, None], own,
                    tf.gather(static_layouts[rule], ops))

  cfg = cfg_at(row_op)
  r_dims, r_current = tf.gather(dims, row_op), tf.gather(current, row_op)
  r_opcode = tf.gather(opcode, row_op)
  operands = []  # Per operand: (op, dims, current layout, exists).
  for p in producers:
    rp = tf.gather(p, row_op)
    q = tf.maximum(rp, 0)
    operands.append((q, tf.gather(dims, q), tf.gather(current, q), rp >= 0))

  def change_features(rule, pick=lambda x: x):  # Of the rows `pick` takes.
    # Only the effective layouts depend on the rule.
    shift = pick(row_shift)
    return lf.layout_change_features(
        pick(r_dims), pick(r_current), pick(r_opcode), pick(cfg),
        layout_of(pick(row_op), shift, rule),
        [(pick(d), pick(c), layout_of(pick(q), shift, rule), pick(has))
         for q, d, c, has in operands])

  # A row's features under another rule differ from the first's only where
  # its op or an operand it has runs in another head (~20% of rows on
  # simulated graphs): those alone are computed again.
  propagated = [change_features(0)]
  for rule in range(1, len(lf.PROPAGATION_RULES)):
    moved = lambda ops: tf.not_equal(tf.gather(rule_heads[rule], ops),
                                     tf.gather(heads, ops))
    differs = moved(row_op)
    for q, _, _, has in operands:
      differs |= has & moved(q)
    where = tf.where(differs)
    propagated.append(tf.tensor_scatter_nd_update(
        propagated[0], where,
        change_features(rule, lambda x: tf.gather_nd(x, where))))
  row_configurable = tf.gather(configurable, row_op)
  row_column = tf.where(row_configurable, tf.gather(column, row_op), 0)
  row_ids = tf.gather(ids, tf.maximum(row_shift + row_column, 0))
  entries = tf.gather(entry_base, row_column[:, None] * 3 + tf.range(3))
  physical = tf.reshape(
      tf.gather(entry_phys, entries + tf.cast(row_ids, tf.int32)),
      [-1, lf.PHYS_WIDTH]) * cfg[:, lf.CONFIGURABLE:]
  phys, cost = lf.under_rules(physical, propagated, dims, r_opcode, cfg,
                              producers, tf.gather(unit, row_op), row_op)

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
  rows_per_config = tf.math.bincount(row_config, minlength=num_configs,
                                     maxlength=num_configs)
  ones = tf.ones([num_configs], tf.int32)
  return tfgnn.GraphTensor.from_pieces(
      context=tfgnn.Context.from_fields(
          sizes=ones,
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
                  "phys": phys, "cost_scale": cost, "cfg": cfg}),
          "config": tfgnn.NodeSet.from_fields(sizes=ones, features={}),
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
                  target=("config_op", tf.range(num_rows)))),
          "adds_to": tfgnn.EdgeSet.from_fields(
              sizes=pairs_per_config,
              adjacency=tfgnn.Adjacency.from_indices(
                  source=("config_op", row_of_pair),
                  target=("config", pair_config))),
      })
