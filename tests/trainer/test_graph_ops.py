"""Tests for expansion, labels and score placement."""

import numpy as np
import tensorflow as tf

from tests.trainer.helpers import make_records
from trainer import graph_ops
from trainer import input_fn
from trainer import layout_features
from trainer import ranking
from trainer import tile_features


def _batch(path, n):
  """The first n examples of valid records (K configs each)."""
  return next(iter(input_fn.read_records([path]).batch(n)))


def test_layout_expansion_copies_graph_per_config(tmp_path):
  path, _ = make_records(tmp_path, "layout", graphs=2, k=5,
                         split="valid")
  serialized = _batch(path, 3)
  merged = input_fn.parse_batch("layout", serialized)
  out = graph_ops.expand("layout", merged, "early")
  k = merged.node_sets["config"].sizes.numpy()
  n = merged.node_sets["op"].sizes.numpy()
  m = merged.edge_sets["feed"].sizes.numpy()
  example = np.repeat(np.arange(len(k)), k)
  np.testing.assert_array_equal(out.node_sets["op"].sizes, n[example])
  np.testing.assert_array_equal(out.edge_sets["feed"].sizes, m[example])
  np.testing.assert_array_equal(out.context["example"], example)
  np.testing.assert_array_equal(
      out.context["slot"], np.concatenate([np.arange(1, x + 1) for x in k]))
  # Config c's copy of each configurable op is joined with exactly config
  # c's 18 features for that op.
  offsets = np.r_[0, np.cumsum(n[example])]
  nc_feat = merged.node_sets["node_config"]["feat"].numpy()
  nc_op = merged.edge_sets["configures"].adjacency.target.numpy()
  nc_cfg = merged.edge_sets["part_of"].adjacency.target.numpy()
  op_off = np.r_[0, np.cumsum(n)]
  joined = out.edge_sets["configures"].adjacency
  np.testing.assert_array_equal(out.node_sets["node_config"]["feat"], nc_feat)
  np.testing.assert_array_equal(joined.source, np.arange(len(nc_feat)))
  np.testing.assert_array_equal(
      out.node_sets["node_config"].sizes, np.bincount(nc_cfg, minlength=k.sum()))
  for j in range(len(nc_feat)):
    c = nc_cfg[j]
    assert joined.target[j] == offsets[c] + nc_op[j] - op_off[example[c]]
  # Every op copy links to its example's op, held once per example.
  source = out.node_sets["source_op"]
  np.testing.assert_array_equal(source["feat"], merged.node_sets["op"]["feat"])
  np.testing.assert_array_equal(source.sizes, np.where(
      out.context["slot"].numpy() == 1, n[example], 0))
  copies = out.edge_sets["copies"].adjacency
  np.testing.assert_array_equal(copies.target, np.arange(offsets[-1]))
  copy_comp = np.repeat(np.arange(len(example)), n[example])
  np.testing.assert_array_equal(
      copies.source, op_off[example[copy_comp]] + np.arange(offsets[-1]) -
      offsets[copy_comp])
  # Edges stay inside their copy; rev is feed reversed.
  src = out.edge_sets["feed"].adjacency.source.numpy()
  comp = np.repeat(np.arange(len(example)), m[example])
  assert np.all((src >= offsets[comp]) & (src < offsets[comp + 1]))
  np.testing.assert_array_equal(out.edge_sets["rev"].adjacency.target, src)


def test_tile_expansion_keeps_one_component_per_example(tmp_path):
  path, _ = make_records(tmp_path, "tile", graphs=2, k=4,
                         split="valid")
  merged = input_fn.parse_batch("tile", _batch(path, 3))
  out = graph_ops.expand("tile", merged)
  assert int(out.num_components) == 3
  np.testing.assert_array_equal(out.node_sets["config"]["feat"],
                                merged.node_sets["config"]["feat"])
  np.testing.assert_array_equal(out.edge_sets["rev"].adjacency.source,
                                merged.edge_sets["feed"].adjacency.target)


def test_labels_are_normalised_non_negative_and_padded(tmp_path):
  path, _ = make_records(tmp_path, "layout", graphs=2, k=5,
                         split="valid")
  merged = input_fn.parse_batch("layout", _batch(path, 4))
  k = 7
  labels = ranking.labels("layout", merged, k).numpy()
  sizes = merged.node_sets["config"].sizes.numpy()
  runtime = merged.node_sets["config"]["runtime"].numpy()
  start = 0
  for row, size in enumerate(sizes):
    real, pad = labels[row, :size], labels[row, size:]
    assert np.all(pad == -1)
    assert np.all((real > 0) & (real <= 1)) and np.isclose(real.max(), 1)
    rt = runtime[start:start + size]
    # Faster configs get higher labels.
    assert np.array_equal(np.argsort(-real, kind="stable"),
                          np.argsort(rt, kind="stable"))
    start += size


def test_tile_labels_use_normalised_runtimes(tmp_path):
  path, _ = make_records(tmp_path, "tile", graphs=1, k=5,
                         split="valid")
  merged = input_fn.parse_batch("tile", _batch(path, 1))
  cfg = merged.node_sets["config"]
  norm = cfg["runtime"].numpy() / cfg["normalizer"].numpy()
  labels = ranking.labels("tile", merged, 5).numpy()[0]
  np.testing.assert_allclose(labels, norm.min() / norm, rtol=1e-5)


def test_scores_to_matrix_drops_padding():
  scores = tf.constant([1., 2., 3., 9.])
  example = tf.constant([0, 1, 1, 0])
  slot = tf.constant([1, 2, 1, 0])  # The last is padding.
  m = ranking.scores_to_matrix(scores, example, slot, 2, 3).numpy()
  np.testing.assert_array_equal(m, [[1, 0, 0], [3, 2, 0]])


def test_physical_layout_features_by_hand():
  feat = np.zeros((3, 140), np.float32)
  feat[0, 21:23] = (4, 128)  # Producer, layout (1, 0).
  feat[0, 134:136] = (1, 0)
  feat[1, 21:23] = (3, 224)  # Consumer, layout (1, 0), configurable.
  feat[1, 134:136] = (1, 0)
  cfg = -np.ones((3, 19), np.float32)
  cfg[:, 18] = 0
  cfg[1, 18] = 1
  cfg[1, 0:2] = (0, 1)  # Output: dim 0 (size 3) most minor.
  cfg[1, 6:8] = (1, 0)  # Input: as the producer has it.
  src, tgt = np.array([0]), np.array([1])
  producers = layout_features.operand_producers(3, src, tgt)
  phys = layout_features.physical_layout_features(
      *layout_features.op_shapes(feat), cfg, producers).numpy()
  assert phys.shape == (3, layout_features.PHYS_WIDTH)
  assert not phys[[0, 2]].any()  # Only configurable ops get values.
  width = layout_features.PHYS_WIDTH // 3
  out, inp, kern = phys[1, :width], phys[1, width:2 * width], phys[1, 2 * width:]
  tiling = layout_features.TILING
  # Lanes (128, 256), then sublanes (8, 16, 32).
  assert (tiling.stop - tiling.start, width) == (5, 9)
  np.testing.assert_allclose(out[:2], np.log([3, 224]), rtol=1e-5)
  np.testing.assert_allclose(out[tiling], np.log([128 / 3, 256 / 3, 1, 1, 1]),
                             rtol=1e-5)
  assert out[-2] == 0 and out[-1] == 0  # Explicit, and not the current one.
  np.testing.assert_allclose(inp[:2], np.log([128, 4]), rtol=1e-5)
  np.testing.assert_allclose(inp[tiling], np.log([1, 2, 2, 4, 8]), rtol=1e-5)
  assert inp[-2] == 0 and inp[-1] == 1  # Same as the producer's layout.
  assert not kern.any()  # No second operand.


def test_propagated_layout_features_by_hand():
  """A dot's chosen layout runs down its elementwise chain; copies appear
  exactly where a reader wants another layout than its operand has."""
  from schemas import opcodes  # pylint: disable=g-import-not-at-top
  names = ["parameter", "dot", "add", "reduce", "transpose", "copy",
           "negate"]
  opcode = np.array([opcodes.opcode_id(x) for x in names], np.int32)
  feat = np.zeros((7, 140), np.float32)
  feat[:, 21:23] = (4, 128)
  feat[:, 134:136] = (1, 0)  # Every op's current layout: (1, 0).
  feat[6, 21:24] = (4, 128, 2)  # Rank 3: does not inherit the rank-2 one.
  feat[6, 134:137] = (2, 1, 0)
  cfg = -np.ones((7, 19), np.float32)
  cfg[:, 18] = 0
  cfg[[1, 4, 5], 18] = 1
  cfg[1, 0:2] = (0, 1)  # dot: output (0, 1) ...
  cfg[1, 6:8] = (0, 1)  # ... reads its operand (now (1, 0)) as (0, 1).
  cfg[4, 6:8] = (0, 1)  # transpose: reads the add as (0, 1), as it is.
  # copy (5): reads the add in whatever layout it has (-1).
  # parameter -> dot -> add -> {reduce, transpose, copy, negate}.
  src = np.array([0, 1, 2, 2, 2, 2], np.int32)
  tgt = np.array([1, 2, 3, 4, 5, 6], np.int32)
  out = layout_features.propagated_layout_features(
      *layout_features.op_shapes(feat), opcode, cfg,
      layout_features.operand_producers(7, src, tgt)).numpy()
  assert out.shape == (7, layout_features.PROPAGATED_WIDTH)
  changed = layout_features.TILING.stop  # "Not the current layout".
  first_copy, second_copy = layout_features.PROP_COPY
  first_moved, second_moved = layout_features.PROP_MOVED_MINOR
  # The dot and the add run in (0, 1): no longer their current layout.
  np.testing.assert_array_equal(out[:, changed], [0, 1, 1, 0, 0, 0, 0])
  np.testing.assert_allclose(out[2, :2], np.log([4, 128]), rtol=1e-6)
  # First-operand copies: the dot (reads (0, 1) of a (1, 0) parameter),
  # the reduce and the rank-3 negate (want the add's default (1, 0)).
  np.testing.assert_array_equal(out[:, first_copy], [0, 1, 0, 1, 0, 0, 1])
  np.testing.assert_allclose(out[3, first_copy + 1], np.log(4 * 128),
                             rtol=1e-6)
  # Nobody has a second operand.
  assert not out[:, [second_copy, second_copy + 1, second_moved]].any()
  # Reads with another minor dim than the operand's current (1, 0): the
  # dot's and transpose's chosen (0, 1), the add and copy following the
  # dot's (0, 1); the reduce and negate read the add's current layout.
  np.testing.assert_array_equal(out[:, first_moved], [0, 1, 1, 0, 1, 1, 0])


def test_the_unary_rule_stops_a_layout_at_two_operand_ops():
  """Under XLA's rule a dot's layout runs through negate, add and tanh;
  under the unary rule it stops before the add (two operands), which reads
  the negate through a copy and runs, as the tanh after it, as it was."""
  from schemas import opcodes  # pylint: disable=g-import-not-at-top
  names = ["parameter", "dot", "negate", "add", "tanh"]
  opcode = np.array([opcodes.opcode_id(x) for x in names], np.int32)
  feat = np.zeros((5, 140), np.float32)
  feat[:, 21:23] = (4, 128)
  feat[:, 134:136] = (1, 0)
  cfg = -np.ones((5, 19), np.float32)
  cfg[:, 18] = 0
  cfg[1, 18] = 1
  cfg[1, 0:2] = (0, 1)  # The dot's output: (0, 1).
  # parameter -> dot -> negate -> add(negate, parameter) -> tanh.
  src = np.array([0, 1, 2, 0, 3], np.int32)
  tgt = np.array([1, 2, 3, 3, 4], np.int32)
  producers = layout_features.operand_producers(5, src, tgt)
  out = {rule: layout_features.propagated_layout_features(
      *layout_features.op_shapes(feat), opcode, cfg, producers, rule).numpy()
         for rule in layout_features.PROPAGATION_RULES}
  changed = layout_features.TILING.stop
  first_copy, second_copy = layout_features.PROP_COPY
  np.testing.assert_array_equal(out["elementwise"][:, changed],
                                [0, 1, 1, 1, 1])
  np.testing.assert_array_equal(out["unary"][:, changed], [0, 1, 1, 0, 0])
  # XLA's rule: the add reads the parameter, (1, 0), in (0, 1).
  np.testing.assert_array_equal(out["elementwise"][:, first_copy], 0)
  np.testing.assert_array_equal(out["elementwise"][:, second_copy],
                                [0, 0, 0, 1, 0])
  # The unary rule: the add reads the negate, (0, 1), in (1, 0).
  np.testing.assert_array_equal(out["unary"][:, first_copy], [0, 0, 0, 1, 0])
  np.testing.assert_array_equal(out["unary"][:, second_copy], 0)


def test_cost_scales_are_linear_sizes_relative_to_their_graph():
  """Own size, an operand's size where a copy moves it, a dot's work where
  it reads an operand along another minor dim and in all, and its reads,
  each over the mean op size of the component (unpadded: the model pads
  them under the tiling it learns)."""
  from schemas import opcodes  # pylint: disable=g-import-not-at-top
  opcode = np.array([opcodes.opcode_id(x) for x in
                     ("parameter", "parameter", "dot", "add")], np.int32)
  feat = np.zeros((4, 140), np.float32)
  feat[0, 21:23] = (8, 16)  # lhs [m, k]: 128 elements.
  feat[1, 21:23] = (16, 32)  # rhs [k, n]: 512 elements.
  feat[2, 21:23] = (8, 32)  # out [m, n]: 256; component 0 mean: 298.67.
  feat[3, 21] = 10  # Component 1: a lone add of 10 elements.
  propagated = np.zeros((4, layout_features.PROPAGATED_WIDTH), np.float32)
  propagated[2, layout_features.PROP_COPY[0]] = 1  # The dot copies its lhs
  # to another layout, and reads its rhs along another minor dim.
  propagated[2, layout_features.PROP_MOVED_MINOR[1]] = 1
  cfg = np.zeros((4, 19), np.float32)
  cfg[2, 18] = 1  # The dot is configurable.
  src, tgt = np.array([0, 1], np.int32), np.array([2, 2], np.int32)
  dims, _ = layout_features.op_shapes(feat)
  out = layout_features.cost_scales(
      dims, opcode, cfg, propagated,
      layout_features.operand_producers(4, src, tgt),
      layout_features.size_units(dims, np.array([3, 1], np.int32))).numpy()
  assert out.shape == (4, layout_features.COST_SCALE_WIDTH)
  unit = (128 + 512 + 256) / 3
  work = 8 * 32 * 16 / layout_features.MATMUL_WORK_PER_ELEMENT  # m * n * k.
  np.testing.assert_allclose(out[:3] * unit, [
      [128, 0, 0, 0, 0, 0, 0, 0], [512, 0, 0, 0, 0, 0, 0, 0],
      [256, 128, 0, 0, work, work, 128, 512]], rtol=1e-5)
  np.testing.assert_allclose(out[3], [1, 0, 0, 0, 0, 0, 0, 0])


def test_tile_config_features_by_hand(tmp_path):
  path, graphs = make_records(tmp_path, "tile", graphs=1, k=4,
                         split="valid")
  merged = input_fn.parse_batch("tile", _batch(path, 1))
  phys = tile_features.tile_config_features(merged).numpy()
  g = graphs[0]
  root = int(np.flatnonzero(g.node_feat[:, 0])[0])
  dims = g.node_feat[root, 21:27]
  idx = merged.node_sets["config"]["index"].numpy()
  for row, i in enumerate(idx):
    bounds = g.config_feat[i, 8:14]
    brank = int((bounds > 0).sum())
    # The protos' units: lanes of 128 and sublanes of 8 for the two
    # most-minor dims, elements elsewhere.
    tiles = bounds * np.array([128.0 if j == brank - 1 else
                               8.0 if j == brank - 2 else 1.0
                               for j in range(6)])
    want = [np.log(np.ceil(d / t)) if d > 0 and t > 0 else 0.0
            for d, t in zip(dims, tiles)]
    np.testing.assert_allclose(phys[row, :6], want, rtol=1e-5, atol=1e-6)
    d, t = dims[brank - 1], tiles[brank - 1]
    np.testing.assert_allclose(
        phys[row, 7], np.log(np.ceil(d / t) * t / d) if d > 0 else 0.0,
        atol=1e-5)
