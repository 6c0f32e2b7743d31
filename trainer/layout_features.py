"""Physical features of layout configs: what chosen layouts mean at every op.

`expand_layout` attaches them to each op copy of a config: `phys` (the
layouts' tiling at configurable ops, `physical_layout_features`, and where
they propagate with the copies they imply, `propagated_layout_features`,
under each of PROPAGATION_RULES) and `cost_scale` (the linear sizes those
copies and the op move, `cost_scales`, under each rule). Columns are read
by name from `schemas.features`.
"""

from typing import Optional

import tensorflow as tf

from schemas import features as F
from schemas import opcodes
from trainer import batch_index
from trainer import tpu_tiling

# Column groups of the raw node features and of `cfg` (the 18 config
# features plus the "configurable" flag that `expand_layout` appends).
_SHAPE = slice(F.SHAPE_DIMS, F.SHAPE_DIMS + F.MAX_RANK)
_LAYOUT = slice(F.LAYOUT_MINOR_TO_MAJOR, F.LAYOUT_MINOR_TO_MAJOR + F.MAX_RANK)
_OUT = slice(F.LAYOUT_OUTPUT, F.LAYOUT_OUTPUT + F.MAX_RANK)
_OPERANDS = (slice(F.LAYOUT_INPUT, F.LAYOUT_INPUT + F.MAX_RANK),
             slice(F.LAYOUT_KERNEL, F.LAYOUT_KERNEL + F.MAX_RANK))
CONFIGURABLE = F.LAYOUT_CONFIG_FEATURES  # The flag column of `cfg`.
CFG_WIDTH = F.LAYOUT_CONFIG_FEATURES + 1


# Columns of `layout_phys`: log minor and second-minor sizes, the log
# padding of each under every tiling choice (TILING, lanes then sublanes),
# "default chosen", "same as current".
_LANES, _SUBLANES = len(F.TILE_LANE_CHOICES), len(F.TILE_SUBLANE_CHOICES)
TILING = slice(2, 2 + _LANES + _SUBLANES)
_LAYOUT_PHYS_WIDTH = TILING.stop + 2


def _element_counts(dims):
  """Element count of each shape in `dims` ([N, 6], 0-padded): [N]."""
  return tf.reduce_prod(tf.where(dims > 0, dims, 1.0), axis=1)


def layout_phys(dims, current, chosen):
  """Physical meaning of one layout choice for a tensor of shape `dims`.

  Args:
    dims: [N, 6] shape dims (0-padded).
    current: [N, 6] the tensor's current minor_to_major (stands in for the
      compiler default, chosen = all -1).
    chosen: [N, 6] the configured minor_to_major, -1 padded.

  Returns:
    [N, 9]: log sizes of the most-minor and second-minor dims; log padding
    waste of the most-minor to each of `TILE_LANE_CHOICES` and of the
    second-minor to each of `TILE_SUBLANE_CHOICES` (columns TILING: the
    model learns which tiling the chip has, `learned_tiling.LearnedTiling`);
    "default chosen", "same as current".
  """
  rank = tf.reduce_sum(tf.cast(dims > 0, tf.int32), axis=1)
  current = tf.cast(tf.round(current), tf.int32)
  chosen = tf.cast(tf.round(chosen), tf.int32)
  is_default = chosen[:, 0] < 0
  perm = tf.clip_by_value(tf.where(is_default[:, None], current, chosen), 0,
                          F.MAX_RANK - 1)
  minor = tf.maximum(tf.gather(dims, perm[:, 0], batch_dims=1), 1.0)
  second = tf.where(rank >= 2, tf.gather(dims, perm[:, 1], batch_dims=1), 1.0)
  second = tf.maximum(second, 1.0)
  pad_minor = tpu_tiling.log_paddings(minor, F.TILE_LANE_CHOICES)
  pad_second = tpu_tiling.log_paddings(second, F.TILE_SUBLANE_CHOICES)
  same = tf.reduce_all(tf.logical_or(tf.equal(chosen, current),
                                     tf.range(F.MAX_RANK)[None, :] >= rank[:, None]),
                       axis=1)
  return tf.concat([
      tf.math.log(minor)[:, None], tf.math.log(second)[:, None], pad_minor,
      pad_second, tf.cast(is_default, tf.float32)[:, None],
      tf.cast(tf.logical_or(same, is_default), tf.float32)[:, None]], axis=1)


def op_shapes(feat: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """The columns the layout features read: ([N, 6] dims, [N, 6] current
  minor_to_major) of [N, 140] raw node features."""
  return feat[:, _SHAPE], feat[:, _LAYOUT]


def physical_layout_features(dims: tf.Tensor, current: tf.Tensor,
                             cfg: tf.Tensor, producers) -> tf.Tensor:
  """What a configurable op's chosen layouts mean physically.

  TPU memory is tiled over the two most-minor dims (by 8-32 sublanes and
  128 lanes), so whether a layout is good depends on the sizes it puts
  there. For the output layout
  (config features 0-5) this reads the op's own shape (node features 21-26)
  and current layout (134-139); for the input (6-11) and kernel (12-17)
  layouts, those of its first and second operand. See `layout_phys` for
  the values per layout. Zero for other ops.

  Args:
    dims: [N, 6] shape dims (`op_shapes`).
    current: [N, 6] current minor_to_major (`op_shapes`).
    cfg: [N, 19] config features plus the configurable flag.
    producers: each op's first and second operand, as `operand_producers`
      gives them.

  Returns:
    [N, PHYS_WIDTH] float32.
  """
  operands = [(tf.gather(dims, tf.maximum(p, 0)),
               tf.gather(current, tf.maximum(p, 0)), p >= 0)
              for p in producers]
  return chosen_layout_features(dims, current, operands, cfg)


def chosen_layout_features(dims, current, operands, cfg) -> tf.Tensor:
  """`physical_layout_features` of ops given with their operands' shapes.

  Args:
    dims: [R, 6] the ops' shape dims.
    current: [R, 6] their current minor_to_major.
    operands: for the first and second operand, ([R, 6] dims, [R, 6]
      current minor_to_major, [R] bool: the op has it).
    cfg: [R, 19] config features plus the configurable flag.

  Returns:
    [R, PHYS_WIDTH] float32.
  """
  parts = [layout_phys(dims, current, cfg[:, _OUT])]
  for (p_dims, p_current, has), group in zip(operands, _OPERANDS):
    phys = layout_phys(p_dims, p_current, cfg[:, group])
    parts.append(phys * tf.cast(has, tf.float32)[:, None])
  return tf.concat(parts, axis=1) * cfg[:, CONFIGURABLE:CONFIGURABLE + 1]


PHYS_WIDTH = 3 * _LAYOUT_PHYS_WIDTH

# Longest elementwise chain a chosen layout is followed along: chains in
# conv/dot nets (bias, activation, normalisation) are a few ops long.
PROPAGATION_STEPS = 8
_ELEMENTWISE_IDS = sorted(opcodes.opcode_id(n) for n in opcodes.ELEMENTWISE)
# Which ops a layout propagates through: XLA's rule (every same-shape
# elementwise op, the first) or the one-operand ones only. The features
# carry both; the model learns the chip's (`learned_propagation`).
PROPAGATION_RULES = ("elementwise", "unary")
_INHERITING_IDS = {
    "elementwise": _ELEMENTWISE_IDS,
    "unary": sorted(opcodes.opcode_id(n) for n in opcodes.ELEMENTWISE_UNARY)}
# `config_rows` relies on it: the first rule lets the most ops inherit.
assert set(_INHERITING_IDS["unary"]) <= set(_INHERITING_IDS["elementwise"])


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


def propagated_layout_features(dims: tf.Tensor, current: tf.Tensor,
                               opcode: tf.Tensor, cfg: tf.Tensor, producers,
                               rule: str = PROPAGATION_RULES[0]
                               ) -> tf.Tensor:
  """Every op's layout under the config, and the copies it implies.

  XLA's layout assignment runs an elementwise op in its first operand's
  layout (when the shapes match), so a configurable op's output layout
  spreads down the elementwise chain after it (`effective_layouts`); where
  an op reads an operand in another layout than the operand has, a copy
  (transpose) runs. See `layout_change_features` for the columns.

  Args:
    dims: [N, 6] shape dims (`op_shapes`).
    current: [N, 6] current minor_to_major (`op_shapes`).
    opcode: [N] opcode ids.
    cfg: [N, 19] config features plus the configurable flag.
    producers: each op's first and second operand, as `operand_producers`
      gives them.
    rule: Which ops inherit a layout (one of PROPAGATION_RULES).

  Returns:
    [N, PROPAGATED_WIDTH] float32.
  """
  layouts = effective_layouts(dims, current, opcode, cfg, producers,
                              rule=rule)
  operands = []
  for producer in producers:
    p = tf.maximum(producer, 0)
    operands.append((tf.gather(dims, p), tf.gather(current, p),
                     tf.gather(layouts, p), producer >= 0))
  return layout_change_features(dims, current, opcode, cfg, layouts,
                                operands)


def layout_change_features(dims: tf.Tensor, current: tf.Tensor,
                           opcode: tf.Tensor, cfg: tf.Tensor,
                           layout: tf.Tensor, operands) -> tf.Tensor:
  """`propagated_layout_features` of ops given with their operands' layouts.

  Row by row, so a caller that knows the effective layouts another way
  (`config_rows`: from the layout heads' config values) computes the same
  features for any set of (op, config) rows:

  * `layout_phys` of the op's effective layout against its current one
    (what the config changes for ops it does not touch directly);
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
    dims: [R, 6] the ops' shape dims.
    current: [R, 6] their current minor_to_major.
    opcode: [R] their opcode ids.
    cfg: [R, 19] their config features plus the configurable flag.
    layout: [R, 6] their effective layouts (`effective_layouts`).
    operands: for the first and second operand, ([R, 6] dims, [R, 6]
      current minor_to_major, [R, 6] effective layout, [R] bool: the op
      has it).

  Returns:
    [R, PROPAGATED_WIDTH] float32: the first TILING.stop columns of the
    `layout_phys` of the effective layout, then "not the current layout",
    then per operand the conflict flag (PROP_COPY) and its log size, then
    per operand the moved-minor-dim flag (PROP_MOVED_MINOR).
  """
  configurable = cfg[:, CONFIGURABLE] > 0
  elementwise = _is_elementwise(opcode)

  def differ(a, b, shape):  # Over the dims of `shape` only (rest padding).
    rank = tf.reduce_sum(tf.cast(shape > 0, tf.int32), axis=1)
    return tf.reduce_any((tf.range(F.MAX_RANK)[None, :] < rank[:, None]) &
                         tf.not_equal(a, b), axis=1)

  parts = [layout_phys(dims, current, layout)[:, :TILING.stop],
           tf.cast(differ(layout, current, dims), tf.float32)[:, None]]
  moved = []
  for (operand_dims, operand_current, operand_layout, has), group in zip(
      operands, _OPERANDS):
    reads_chosen = configurable & (cfg[:, group.start] >= 0)
    reads_as_is = configurable & ~reads_chosen
    # Same-shape elementwise ops read every operand in their own layout.
    reads_own = elementwise & tf.reduce_all(tf.equal(dims, operand_dims),
                                            axis=1)
    wanted = tf.where(
        reads_chosen[:, None], cfg[:, group],
        tf.where(reads_as_is[:, None], operand_layout,
                 tf.where(reads_own[:, None], layout, operand_current)))
    conflict = has & differ(wanted, operand_layout, operand_dims)
    size = tf.math.log(_element_counts(operand_dims))
    conflict = tf.cast(conflict, tf.float32)
    parts += [conflict[:, None], (conflict * size)[:, None]]
    moved.append(has & tf.not_equal(wanted[:, 0], operand_current[:, 0]))
  parts += [tf.cast(m, tf.float32)[:, None] for m in moved]
  return tf.concat(parts, axis=1)


def _is_elementwise(opcode, ids=_ELEMENTWISE_IDS):
  return tf.reduce_any(tf.equal(tf.cast(opcode, tf.int32)[:, None], ids),
                       axis=1)


def inheriting(dims, opcode, cfg, producers,
               rule: str = PROPAGATION_RULES[0]):
  """[N] bool: ops that run in their first operand's layout (same-shape
  ops that `rule`, one of PROPAGATION_RULES, lets inherit and that are not
  configurable)."""
  first = tf.maximum(producers[0], 0)
  return (_is_elementwise(opcode, _INHERITING_IDS[rule]) &
          ~(cfg[:, CONFIGURABLE] > 0) &
          (producers[0] >= 0) &
          tf.reduce_all(tf.equal(dims, tf.gather(dims, first)), axis=1))


def layout_heads(inherits, producers) -> tf.Tensor:
  """[N] int32: the op whose own layout each op runs in.

  Itself, or for an op that inherits (`inheriting`) the head of its first
  operand, followed at most PROPAGATION_STEPS ops up the chain. Config
  independent: what a config changes is the heads' own layouts.
  """
  first = tf.maximum(producers[0], 0)
  itself = tf.range(tf.shape(inherits)[0])
  head = itself
  for _ in range(PROPAGATION_STEPS):
    head = tf.where(inherits, tf.gather(head, first), itself)
  return head


def chosen_or_current(out: tf.Tensor, current: tf.Tensor) -> tf.Tensor:
  """[N, 6] float32: the chosen output layouts `out` (-1 padded; -1 first:
  left to the compiler), else the current ones."""
  return tf.where((out[:, 0] >= 0)[:, None], out, current)


def own_layouts(current: tf.Tensor, cfg: tf.Tensor) -> tf.Tensor:
  """[N, 6] float32: each op's own output layout under the config: the
  chosen `out` of a configurable op, else (also where the config leaves it
  to the compiler) its current layout."""
  configurable = (cfg[:, CONFIGURABLE] > 0)[:, None]
  return chosen_or_current(tf.where(configurable, cfg[:, _OUT], -1.0),
                           current)


def effective_layouts(dims, current, opcode, cfg, producers,
                      heads: Optional[tf.Tensor] = None,
                      rule: str = PROPAGATION_RULES[0]) -> tf.Tensor:
  """[N, 6] float32: each op's output layout under the config.

  Its layout head's own layout (`own_layouts`): the chosen `out` of a
  configurable op followed at most PROPAGATION_STEPS ops down each
  same-shape elementwise chain (the ops `rule` lets inherit); the current
  layout elsewhere. `heads` (`layout_heads` under `rule`), if the caller
  has them, saves the walk.
  """
  if heads is None:
    heads = layout_heads(inheriting(dims, opcode, cfg, producers, rule),
                         producers)
  return tf.gather(own_layouts(current, cfg), heads)


PROPAGATED_WIDTH = TILING.stop + 7
# Columns of `propagated_layout_features` that `cost_scales` reads.
PROP_COPY = (TILING.stop + 1, TILING.stop + 3)
PROP_MOVED_MINOR = (TILING.stop + 5, TILING.stop + 6)
# Where each group of TILING columns starts in `phys` (the concatenation
# of `physical_layout_features` and `propagated_layout_features`): the
# output, input and kernel layouts, then the effective layout.
TILED_LAYOUTS = tuple(i * _LAYOUT_PHYS_WIDTH for i in range(4))


def size_units(dims: tf.Tensor, sizes: tf.Tensor) -> tf.Tensor:
  """[N] the mean element count of the ops of each op's graph component
  (at least 1): the unit of `cost_scales`."""
  elements = _element_counts(dims)
  component = batch_index.segment_ids(sizes)
  mean = tf.math.unsorted_segment_mean(elements, component, tf.size(sizes))
  return tf.maximum(tf.gather(mean, component), 1.0)


def cost_scales(dims: tf.Tensor, opcode: tf.Tensor, cfg: tf.Tensor,
                propagated: tf.Tensor, producers, unit: tf.Tensor,
                rows: Optional[tf.Tensor] = None) -> tf.Tensor:
  """Linear-scale sizes of what an op moves, relative to its graph.

  A roofline cost grows with the bytes moved, so an op's cost is a size
  times a factor the layout sets; a copy costs the size of the tensor it
  moves. Sizes span orders of magnitude, and the op states hold only their
  logs, from which an MLP cannot rebuild their sum. These are the sizes
  themselves, for a readout linear in them (`model.LayoutReadout`):

  * the op's element count (padded by its effective layout);
  * per operand (first, second): its element count where the op reads it in
    another layout (a copy runs on that edge), else 0;
  * for dots and convolutions, per operand (first, second): the op's work
    where it reads that operand with another most-minor dim, else 0. The
    work is sqrt(output x lhs x rhs elements): m*n*k for an [m, k] x [k, n]
    dot, and about batch x pixels x input x output features x window for a
    convolution (flops / 2 either way), with no need to know which dims
    contract. It is divided by MATMUL_WORK_PER_ELEMENT, to be in the same
    unit as the sizes;
  * for dots and convolutions, that work (padded as the op's output layout
    pads its output: what the matrix unit computes);
  * for configurable ops, per operand (first, second): its element count
    (padded as the layout the op reads it in pads it: what the read moves).

  The padding depends on the chip's tiling, which the model learns: the
  sizes here are unpadded, and `COST_PADDING` names the layout whose
  padding (`learned_tiling.LearnedTiling`) scales each. Each is divided by the mean
  element count of the ops in the same graph (`size_units`), so the scale
  is comparable across graphs.

  Args:
    dims: [N, 6] shape dims (`op_shapes`).
    opcode: [N] opcode ids.
    cfg: [N, 19] config features plus the configurable flag.
    propagated: [N, PROPAGATED_WIDTH] of `propagated_layout_features`.
    producers: each op's first and second operand, as `operand_producers`
      gives them.
    unit: [N] `size_units` of each op's graph.
    rows: Optional [R] op indices: the scales of these ops only; then
      `opcode`, `cfg`, `propagated` and `unit` are theirs ([R]) while
      `dims` and `producers` cover all ops (operands index them).

  Returns:
    [N (or R), COST_SCALE_WIDTH] float32.
  """
  elements = _element_counts(dims)
  # Each operand's element count; 0 where the op has no such operand (none,
  # or pruned away).
  operand = [tf.where(p >= 0, tf.gather(elements, tf.maximum(p, 0)), 0.0)
             for p in producers]
  if rows is not None:
    elements = tf.gather(elements, rows)
    operand = [tf.gather(x, rows) for x in operand]
  parts = [elements] + [propagated[:, c] * size
                        for c, size in zip(PROP_COPY, operand)]
  matmul = tf.reduce_any(tf.equal(tf.cast(opcode, tf.int32)[:, None],
                                  _MATMUL_IDS), axis=1)
  work = tf.sqrt(elements * operand[0]) * tf.sqrt(operand[1])
  work = tf.where(matmul, work, 0.0) / MATMUL_WORK_PER_ELEMENT
  parts += [work * propagated[:, c] for c in PROP_MOVED_MINOR]
  parts.append(work)
  configurable = tf.cast(cfg[:, CONFIGURABLE] > 0, tf.float32)
  parts += [configurable * size for size in operand]
  return tf.stack(parts, axis=1) / unit[:, None]


COST_SCALE_WIDTH = 8
# Per `cost_scales` column, the layout (an index into TILED_LAYOUTS) whose
# padding scales it; -1: none. The effective layout pads the op's own size
# and its matmul work, the input and kernel layouts the reads of its
# operands.
COST_PADDING = (3, -1, -1, -1, -1, 3, 1, 2)
# Multiply-adds a TPU matrix unit does in the time HBM moves one element: its
# ridge point, about 100-250 flops per byte across generations (and 125 in
# the simulator's `hardware`). It puts a matmul's work in element units, so
# the readout's rates start on one scale.
MATMUL_WORK_PER_ELEMENT = 128.0
_MATMUL_IDS = sorted(opcodes.opcode_id(n) for n in ("dot", "convolution"))


def under_rules(physical: tf.Tensor, propagated, dims: tf.Tensor,
                opcode: tf.Tensor, cfg: tf.Tensor, producers,
                unit: tf.Tensor, rows: Optional[tf.Tensor] = None
                ) -> tuple[tf.Tensor, tf.Tensor]:
  """The `phys` and `cost_scale` features of ops, under every rule.

  The one layout of both features' columns (`learned_propagation` splits
  them by rule): both joins build them here.

  Args:
    physical: [R, PHYS_WIDTH] `physical_layout_features` (or
      `chosen_layout_features`).
    propagated: Per rule of PROPAGATION_RULES, [R, PROPAGATED_WIDTH]
      `propagated_layout_features` (or `layout_change_features`).
    dims, opcode, cfg, producers, unit, rows: As `cost_scales` takes them.

  Returns:
    ([R, PHYS_WIDTH + rules x PROPAGATED_WIDTH] phys,
     [R, rules x COST_SCALE_WIDTH] cost_scale).
  """
  phys = tf.concat([physical] + list(propagated), axis=1)
  cost_scale = tf.concat([cost_scales(dims, opcode, cfg, p, producers, unit,
                                      rows) for p in propagated], axis=1)
  return phys, cost_scale
