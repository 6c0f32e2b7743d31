"""Turns parsed examples into the graphs the model runs on.

`expand` takes a *merged* batch of parsed examples (one component per
example, as `merge_batch_to_components` gives) and returns the model's input:

* every graph gets a `rev` edge set, the `feed` edges reversed, so message
  passing runs along and against the data flow;
* tile examples keep one component per example: configs join at the graph
  context, so the graph is encoded once for all its configs;
* layout examples become one component per config: a copy of the (pruned)
  graph whose configurable ops carry that config's 18 features in `cfg`
  (early join), since a layout config changes how every op around it runs,
  and in `phys` what that layout means physically (see
  `physical_layout_features`) and where it propagates to, with the copies
  it implies (see `propagated_layout_features`), and in `cost_scale` the
  linear sizes those copies and the op itself move (see `cost_scales`).

Each component (layout) or config node (tile) also gets `example` (its
example in the batch) and `slot` (1 + its position in the example; padding
gets 0), which place scores into the [batch, K] matrix of the ranking loss.
Everything is index arithmetic on tensors, so it runs in tf.data, in the
serving signature, and on any device.
"""

import tensorflow as tf
import tensorflow_gnn as tfgnn

from schemas import opcodes

CFG_WIDTH = 19  # 18 layout config features + "is configurable" flag.


def _exclusive_cumsum(x):
  return tf.math.cumsum(x, exclusive=True)


def _ragged_ranges(starts, sizes):
  """Concatenation of range(starts[i], starts[i] + sizes[i])."""
  return tf.ragged.range(starts, starts + sizes).flat_values


def _with_rev(feed: tfgnn.EdgeSet) -> dict:
  adj = feed.adjacency
  rev = tfgnn.EdgeSet.from_fields(
      sizes=feed.sizes,
      adjacency=tfgnn.Adjacency.from_indices(
          source=("op", adj.target), target=("op", adj.source)))
  return {"feed": tfgnn.EdgeSet.from_fields(sizes=feed.sizes,
                                            adjacency=adj), "rev": rev}


def _segment_ids(sizes):
  """Group id of every item, for items grouped consecutively by sizes."""
  sizes = tf.cast(sizes, tf.int32)
  return tf.repeat(tf.range(tf.size(sizes)), sizes)


def _log_padding(size, multiple: float):
  """log of (size rounded up to a multiple) / size: TPU tiling waste."""
  return tf.math.log(tf.math.ceil(size / multiple) * multiple / size)


def _slots(sizes):
  """(example, 1 + position) of every item, for items grouped by sizes."""
  sizes = tf.cast(sizes, tf.int32)
  example = _segment_ids(sizes)
  position = tf.range(tf.reduce_sum(sizes)) - tf.gather(
      _exclusive_cumsum(sizes), example)
  return example, position + 1


def tile_config_features(graph: tfgnn.GraphTensor) -> tf.Tensor:
  """What each tile config means for its kernel's output shape.

  From the kernel's output shape (node features 21-26 of its root op) and
  the config's output tile sizes (config features 8-13): per dim, log of the
  number of tiles along it; log of all tiles; log padding waste of the tile's
  most-minor size to 128 and second-minor to 8 (TPU's (8, 128) tiling); log
  of the padded tile volume. [configs, TILE_PHYS_WIDTH] float32.
  """
  op = graph.node_sets["op"]
  feat = op["feat"]
  n = tf.shape(feat)[0]
  comp_of_node = _segment_ids(op.sizes)
  is_root = feat[:, 0] > 0
  root = tf.math.unsorted_segment_max(
      tf.where(is_root, tf.range(n), -1), comp_of_node, tf.size(op.sizes))
  root = tf.maximum(root, 0)
  config = graph.node_sets["config"]
  comp_of_config = _segment_ids(config.sizes)
  dims = tf.gather(tf.gather(feat, root)[:, 21:27], comp_of_config)
  tiles = config["feat"][:, 8:14]
  valid = (dims > 0) & (tiles > 0)
  per_dim = tf.where(valid, tf.math.log(tf.math.ceil(
      dims / tf.maximum(tiles, 1.0))), 0.0)
  rank = tf.reduce_sum(tf.cast(dims > 0, tf.int32), axis=1)
  minor = tf.gather(tiles, tf.maximum(rank - 1, 0), batch_dims=1)
  second = tf.where(rank >= 2, tf.gather(tiles, tf.maximum(rank - 2, 0),
                                         batch_dims=1), 1.0)
  minor, second = tf.maximum(minor, 1.0), tf.maximum(second, 1.0)
  pad_minor = _log_padding(minor, 128.0)
  pad_second = _log_padding(second, 8.0)
  volume = tf.reduce_sum(tf.where(valid, tf.math.log(tf.maximum(tiles, 1.0)),
                                  0.0), axis=1) + pad_minor + pad_second
  return tf.concat([per_dim, tf.stack([
      tf.reduce_sum(per_dim, axis=1), pad_minor, pad_second, volume],
                                      axis=1)], axis=1)


TILE_PHYS_WIDTH = 10


def expand_tile(graph: tfgnn.GraphTensor) -> tfgnn.GraphTensor:
  """Tile: adds reversed edges and config slots; one component per example."""
  config = graph.node_sets["config"]
  example, slot = _slots(config.sizes)
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
                        "phys": tile_config_features(graph),
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
  comp_example, slot = _slots(k)  # [C]
  op_off_old = _exclusive_cumsum(n)
  n_new = tf.gather(n, comp_example)
  op_off_new = _exclusive_cumsum(n_new)
  old_op = _ragged_ranges(tf.gather(op_off_old, comp_example), n_new)

  feed = graph.edge_sets["feed"]
  m = tf.cast(feed.sizes, tf.int32)
  m_new = tf.gather(m, comp_example)
  old_edge = _ragged_ranges(tf.gather(_exclusive_cumsum(m), comp_example),
                            m_new)
  edge_comp = _segment_ids(m_new)
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
  values = tf.concat([nc_feat, tf.ones_like(nc_feat[:, :1])], axis=-1)
  total_new = tf.reduce_sum(n_new)
  cfg = tf.scatter_nd(new_op[:, None], values,
                      tf.stack([total_new, CFG_WIDTH]))

  # The source ops of example e sit in its first component (slot 1), in
  # example order; examples without configs have no component and drop out.
  first = tf.boolean_mask(comp_example, tf.equal(slot, 1))  # [E'] examples
  source_rows = _ragged_ranges(tf.gather(op_off_old, first),
                               tf.gather(n, first))
  source_off = tf.scatter_nd(first[:, None], _exclusive_cumsum(
      tf.gather(n, first)), tf.shape(n))  # [E]
  node_comp = _segment_ids(n_new)
  source_of_copy = (tf.gather(source_off, tf.gather(comp_example, node_comp))
                    + tf.range(total_new) - tf.gather(op_off_new, node_comp))
  new_feat = tf.gather(op["feat"], old_op)
  new_opcode = tf.gather(op["opcode"], old_op)
  producers = operand_producers(total_new, src, tgt)
  physical = physical_layout_features(new_feat, cfg, producers)
  propagated = propagated_layout_features(new_feat, new_opcode, cfg,
                                          producers)
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
              features={"phys": tf.concat([physical, propagated], 1),
                        "cost_scale": cost_scales(
                            new_feat, new_opcode, cfg, physical, propagated,
                            producers, n_new)}),
          "source_op": tfgnn.NodeSet.from_fields(
              sizes=tf.where(tf.equal(slot, 1), n_new, 0),
              features={"opcode": tf.gather(op["opcode"], source_rows),
                        "feat": tf.gather(op["feat"], source_rows)}),
          "node_config": tfgnn.NodeSet.from_fields(
              sizes=nc_sizes, features={"feat": nc_feat}),
      },
      edge_sets=edge_sets)


# Columns of `_layout_phys`: 7 per layout; the 5th is its log padded/real
# volume.
_LAYOUT_PHYS_WIDTH = 7
_LAYOUT_PHYS_PADDING = 4


def _element_counts(dims):
  """Element count of each shape in `dims` ([N, 6], 0-padded): [N]."""
  return tf.reduce_prod(tf.where(dims > 0, dims, 1.0), axis=1)


def _layout_phys(dims, current, chosen):
  """Physical meaning of one layout choice for a tensor of shape `dims`.

  Args:
    dims: [N, 6] shape dims (0-padded).
    current: [N, 6] the tensor's current minor_to_major (stands in for the
      compiler default, chosen = all -1).
    chosen: [N, 6] the configured minor_to_major, -1 padded.

  Returns:
    [N, 7]: log sizes of the most-minor and second-minor dims, log padding
    waste of each to (128, 8), log padded/real volume, "default chosen",
    "same as current".
  """
  rank = tf.reduce_sum(tf.cast(dims > 0, tf.int32), axis=1)
  current = tf.cast(tf.round(current), tf.int32)
  chosen = tf.cast(tf.round(chosen), tf.int32)
  is_default = chosen[:, 0] < 0
  perm = tf.clip_by_value(tf.where(is_default[:, None], current, chosen), 0,
                          5)
  minor = tf.maximum(tf.gather(dims, perm[:, 0], batch_dims=1), 1.0)
  second = tf.where(rank >= 2, tf.gather(dims, perm[:, 1], batch_dims=1), 1.0)
  second = tf.maximum(second, 1.0)
  pad_minor = _log_padding(minor, 128.0)
  pad_second = _log_padding(second, 8.0)
  same = tf.reduce_all(tf.logical_or(tf.equal(chosen, current),
                                     tf.range(6)[None, :] >= rank[:, None]),
                       axis=1)
  return tf.stack([
      tf.math.log(minor), tf.math.log(second), pad_minor, pad_second,
      pad_minor + pad_second,
      tf.cast(is_default, tf.float32),
      tf.cast(tf.logical_or(same, is_default), tf.float32)], axis=1)


def physical_layout_features(feat: tf.Tensor, cfg: tf.Tensor,
                             producers) -> tf.Tensor:
  """What a configurable op's chosen layouts mean physically.

  TPU memory is tiled (8, 128) over the two most-minor dims, so whether a
  layout is good depends on the sizes it puts there. For the output layout
  (config features 0-5) this reads the op's own shape (node features 21-26)
  and current layout (134-139); for the input (6-11) and kernel (12-17)
  layouts, those of its first and second operand. See `_layout_phys` for
  the 7 values per layout. Zero for other ops.

  Args:
    feat: [N, 140] raw node features.
    cfg: [N, 19] config features plus the configurable flag.
    producers: each op's first and second operand, as `operand_producers`
      gives them.

  Returns:
    [N, PHYS_WIDTH] float32.
  """
  parts = [_layout_phys(feat[:, 21:27], feat[:, 134:140], cfg[:, 0:6])]
  for producer, group in zip(producers, (slice(6, 12), slice(12, 18))):
    has = producer >= 0
    pfeat = tf.gather(feat, tf.maximum(producer, 0))
    phys = _layout_phys(pfeat[:, 21:27], pfeat[:, 134:140], cfg[:, group])
    parts.append(phys * tf.cast(has, tf.float32)[:, None])
  return tf.concat(parts, axis=1) * cfg[:, 18:19]


PHYS_WIDTH = 3 * _LAYOUT_PHYS_WIDTH
# Log padded/real volume of the input and kernel layouts (first, second
# operand), which `cost_scales` reads.
PHYS_READ_PADDING = tuple(i * _LAYOUT_PHYS_WIDTH + _LAYOUT_PHYS_PADDING
                          for i in (1, 2))

# Longest elementwise chain a chosen layout is followed along: chains in
# conv/dot nets (bias, activation, normalisation) are a few ops long.
PROPAGATION_STEPS = 8
_ELEMENTWISE_IDS = sorted(opcodes.opcode_id(n) for n in opcodes.ELEMENTWISE)


def operand_producers(n, src, tgt):
  """Producer of each op's first and second operand.

  Edges are in operand order, so an op's first incoming edge is its first
  operand. The layout features all read these; `expand_layout` finds them
  once.

  Args:
    n: number of ops.
    src, tgt: [M] feed edges (producer -> consumer), in operand order.

  Returns:
    A pair of [N] int32 op indices (-1: the op has no such operand).
  """
  m = tf.shape(src)[0]
  edge_ids = tf.range(m)
  first = tf.math.unsorted_segment_min(edge_ids, tgt, n)
  rest = tf.where(tf.gather(first, tgt) == edge_ids, m, edge_ids)
  second = tf.math.unsorted_segment_min(rest, tgt, n)
  # Ops without such an edge get m (or the dtype's max): the -1 sentinel.
  src = tf.concat([tf.cast(src, tf.int32), [-1]], 0)
  return [tf.gather(src, tf.minimum(e, m)) for e in (first, second)]


def propagated_layout_features(feat: tf.Tensor, opcode: tf.Tensor,
                               cfg: tf.Tensor, producers) -> tf.Tensor:
  """Every op's layout under the config, and the copies it implies.

  XLA's layout assignment runs an elementwise op in its first operand's
  layout (when the shapes match), so a configurable op's output layout
  spreads down the elementwise chain after it; where an op reads an operand
  in another layout than the operand has, a copy (transpose) runs. This
  follows the chosen layouts along such chains (at most
  PROPAGATION_STEPS ops), so both ends of a copy meet at one op:

  * each op's effective output layout: the chosen `out` of a configurable
    op (its current layout if the config leaves it to the compiler), the
    first operand's for a same-shape elementwise op, the current one else;
  * per op, `_layout_phys` of that layout against its current one (what
    the config changes for ops it does not touch directly);
  * per operand (first, second): a conflict flag (the operand's effective
    layout differs from the layout the op reads it in: the chosen `in` /
    `kernel` layout; the operand's own if the choice is left to the
    compiler; the op's own for a same-shape elementwise op; the operand's
    current layout for any other op) and the flag times the operand's log
    element count (what the copy moves);
  * per operand (first, second): whether the op reads it with another
    most-minor dim than the operand's current layout has (a matrix unit
    streams its operands along the minor dim: dots and convolutions run
    slower when it changes).

  Args:
    feat: [N, 140] raw node features.
    opcode: [N] opcode ids.
    cfg: [N, 19] config features plus the configurable flag.
    producers: each op's first and second operand, as `operand_producers`
      gives them.

  Returns:
    [N, PROPAGATED_WIDTH] float32: columns 0-4 the `_layout_phys` of the
    effective layout (4: PROP_PADDING), 5 "not the current layout", then
    per operand the conflict flag (PROP_COPY) and its log size, then per
    operand the moved-minor-dim flag (PROP_MOVED_MINOR).
  """
  dims, current = feat[:, 21:27], feat[:, 134:140]
  elements = _element_counts(dims)
  configurable = cfg[:, 18] > 0
  chosen = configurable & (cfg[:, 0] >= 0)
  own = tf.where(chosen[:, None], cfg[:, 0:6], current)
  elementwise = tf.reduce_any(tf.equal(
      tf.cast(opcode, tf.int32)[:, None], _ELEMENTWISE_IDS), axis=1)
  first = tf.maximum(producers[0], 0)
  inherits = (elementwise & ~configurable & (producers[0] >= 0) &
              tf.reduce_all(tf.equal(dims, tf.gather(dims, first)), axis=1))
  layout = own
  for _ in range(PROPAGATION_STEPS):
    layout = tf.where(inherits[:, None], tf.gather(layout, first), own)

  def differ(a, b, shape):  # Over the dims of `shape` only (rest padding).
    rank = tf.reduce_sum(tf.cast(shape > 0, tf.int32), axis=1)
    return tf.reduce_any((tf.range(6)[None, :] < rank[:, None]) &
                         tf.not_equal(a, b), axis=1)

  parts = [_layout_phys(dims, current, layout)[:, :5],
           tf.cast(differ(layout, current, dims), tf.float32)[:, None]]
  moved = []
  for producer, group in zip(producers, (slice(6, 12), slice(12, 18))):
    has = producer >= 0
    p = tf.maximum(producer, 0)
    operand_layout = tf.gather(layout, p)
    reads_chosen = configurable & (cfg[:, group.start] >= 0)
    reads_as_is = configurable & ~reads_chosen
    # Same-shape elementwise ops read every operand in their own layout.
    reads_own = elementwise & tf.reduce_all(tf.equal(
        dims, tf.gather(dims, p)), axis=1)
    wanted = tf.where(
        reads_chosen[:, None], cfg[:, group],
        tf.where(reads_as_is[:, None], operand_layout,
                 tf.where(reads_own[:, None], layout, tf.gather(current, p))))
    conflict = has & differ(wanted, operand_layout, tf.gather(dims, p))
    size = tf.math.log(tf.gather(elements, p))
    conflict = tf.cast(conflict, tf.float32)
    parts += [conflict[:, None], (conflict * size)[:, None]]
    moved.append(has & tf.not_equal(wanted[:, 0], tf.gather(current, p)[:, 0]))
  parts += [tf.cast(m, tf.float32)[:, None] for m in moved]
  return tf.concat(parts, axis=1)


PROPAGATED_WIDTH = 12
# Columns of `propagated_layout_features` that `cost_scales` reads.
PROP_PADDING = _LAYOUT_PHYS_PADDING
PROP_COPY = (6, 8)
PROP_MOVED_MINOR = (10, 11)


def cost_scales(feat: tf.Tensor, opcode: tf.Tensor, cfg: tf.Tensor,
                physical: tf.Tensor, propagated: tf.Tensor, producers,
                sizes: tf.Tensor) -> tf.Tensor:
  """Linear-scale sizes of what an op moves, relative to its graph.

  A roofline cost grows with the bytes moved, so an op's cost is a size
  times a factor the layout sets; a copy costs the size of the tensor it
  moves. Sizes span orders of magnitude, and the op states hold only their
  logs, from which an MLP cannot rebuild their sum. These are the sizes
  themselves, for a readout linear in them (`model.LayoutReadout`):

  * the op's padded element count under its effective layout;
  * per operand (first, second): its element count where the op reads it in
    another layout (a copy runs on that edge), else 0;
  * for dots and convolutions, per operand (first, second): the op's work
    where it reads that operand with another most-minor dim, else 0. The
    work is sqrt(output x lhs x rhs elements): m*n*k for an [m, k] x [k, n]
    dot, and about batch x pixels x input x output features x window for a
    convolution (flops / 2 either way), with no need to know which dims
    contract. It is divided by MATMUL_WORK_PER_ELEMENT, to be in the same
    unit as the sizes;
  * for dots and convolutions, that work padded as the op's output layout
    pads its output (what the matrix unit computes);
  * for configurable ops, per operand (first, second): its element count
    padded as the layout the op reads it in pads it (what the read moves).

  Each is divided by the mean element count of the ops in the same graph
  component, so the scale is comparable across graphs.

  Args:
    feat: [N, 140] raw node features.
    opcode: [N] opcode ids.
    cfg: [N, 19] config features plus the configurable flag.
    physical: [N, PHYS_WIDTH] of `physical_layout_features`.
    propagated: [N, PROPAGATED_WIDTH] of `propagated_layout_features`.
    producers: each op's first and second operand, as `operand_producers`
      gives them.
    sizes: [C] ops per component.

  Returns:
    [N, COST_SCALE_WIDTH] float32.
  """
  elements = _element_counts(feat[:, 21:27])
  component = _segment_ids(sizes)
  mean = tf.math.unsorted_segment_mean(elements, component, tf.size(sizes))
  unit = tf.maximum(tf.gather(mean, component), 1.0)
  # Each operand's element count; 0 where the op has no such operand (none,
  # or pruned away).
  operand = [tf.where(p >= 0, tf.gather(elements, tf.maximum(p, 0)), 0.0)
             for p in producers]
  padding = tf.exp(propagated[:, PROP_PADDING])
  parts = [elements * padding] + [propagated[:, c] * size
                                  for c, size in zip(PROP_COPY, operand)]
  matmul = tf.reduce_any(tf.equal(tf.cast(opcode, tf.int32)[:, None],
                                  _MATMUL_IDS), axis=1)
  work = tf.sqrt(elements * operand[0]) * tf.sqrt(operand[1])
  work = tf.where(matmul, work, 0.0) / MATMUL_WORK_PER_ELEMENT
  parts += [work * propagated[:, c] for c in PROP_MOVED_MINOR]
  parts.append(work * padding)
  configurable = tf.cast(cfg[:, 18] > 0, tf.float32)
  for size, c in zip(operand, PHYS_READ_PADDING):
    parts.append(configurable * size * tf.exp(physical[:, c]))
  return tf.stack(parts, axis=1) / unit[:, None]


COST_SCALE_WIDTH = 8
# Multiply-adds a TPU matrix unit does in the time HBM moves one element: its
# ridge point, about 100-250 flops per byte across generations (and 125 in
# the simulator's `hardware`). It puts a matmul's work in element units, so
# the readout's rates start on one scale.
MATMUL_WORK_PER_ELEMENT = 128.0
_MATMUL_IDS = sorted(opcodes.opcode_id(n) for n in ("dot", "convolution"))


def expand(kind: str, graph: tfgnn.GraphTensor) -> tfgnn.GraphTensor:
  """The model input of a merged batch of "tile" or "layout" examples."""
  return expand_tile(graph) if kind == "tile" else expand_layout(graph)


def labels(kind: str, graph: tfgnn.GraphTensor, k: int) -> tf.Tensor:
  """Ranking labels [E, k] of a merged batch: higher = faster, -1 = padding.

  A config's label is the fastest runtime in its example divided by its own
  (tile: runtimes normalised by the default config's first), in (0, 1]:
  normalised per graph and never negative, since TF-Ranking reads labels < 0
  as padding. Examples with fewer than k configs are padded with -1.
  """
  config = graph.node_sets["config"]
  runtime = tf.cast(config["runtime"], tf.float64)
  if kind == "tile":
    runtime = runtime / tf.maximum(tf.cast(config["normalizer"], tf.float64),
                                   1.0)
  sizes = tf.cast(config.sizes, tf.int32)
  example, slot = _slots(sizes)
  fastest = tf.math.unsorted_segment_min(runtime, example, tf.size(sizes))
  rel = tf.gather(fastest, example) / tf.maximum(runtime, 1e-9)
  rel = tf.where(runtime > 0, rel, 0.0)  # Unknown runtimes: no preference.
  dense = tf.scatter_nd(tf.stack([example, slot - 1], axis=1),
                        tf.cast(rel, tf.float32) + 1.0,
                        tf.stack([tf.size(sizes), k]))
  return dense - 1.0  # Untouched slots end at -1.


def scores_to_matrix(scores: tf.Tensor, example: tf.Tensor, slot: tf.Tensor,
                     batch: int, k: int) -> tf.Tensor:
  """Places flat per-config scores into [batch, k]; padding (slot 0) drops."""
  real = slot > 0
  row = tf.where(real, example, batch)  # Padding goes to a spare row.
  col = tf.where(real, slot - 1, 0)
  full = tf.scatter_nd(tf.stack([row, col], axis=1), scores,
                       tf.constant([batch + 1, k]))
  return full[:batch]
