"""Tests for the 140-feature encoding of one instruction."""

import numpy as np

from schemas import features as F
from schemas import node_encoding
from schemas.node_encoding import ConvDims, Instruction, Window


def test_convolution_features_at_documented_indices():
  inst = Instruction(
      opcode="convolution", element_type="bf16", dims=(8, 28, 28, 64),
      layout=(3, 2, 1, 0), operands=(0, 1), is_root=True,
      window=Window(size=(3, 3), stride=(2, 2), padding_low=(1, 1),
                    padding_high=(1, 1), dilation=(1, 1), base_dilation=(1, 1),
                    reversal=(False, True)),
      conv_dims=ConvDims(0, 3, (1, 2), 2, 3, (0, 1), 0, 3),
      feature_group_count=1, batch_group_count=1)
  v = node_encoding.encode(inst)
  assert v.shape == (140,) and v.dtype == np.float32
  assert v[0] == 1  # is_root
  assert v[15] == 1 and v[2:21].sum() == 1  # bf16 one-hot
  np.testing.assert_array_equal(v[21:29], [8, 28, 28, 64, 0, 0, 128,
                                           8 * 28 * 28 * 64])
  np.testing.assert_array_equal(v[37:45], [3, 3, 0, 0, 0, 0, 6, 9])
  np.testing.assert_array_equal(v[45:53], [2, 2, 0, 0, 0, 0, 4, 4])
  np.testing.assert_array_equal(v[85:93], [0, 1, 0, 0, 0, 0, 1, 1])
  assert (v[93], v[94], v[95], v[96]) == (0, 3, 1, 2)
  assert (v[99], v[100], v[101], v[102], v[105], v[106]) == (2, 3, 0, 1, 0, 3)
  assert v[107] == 1 and v[108] == 1
  np.testing.assert_array_equal(v[134:140], [3, 2, 1, 0, 0, 0])


def test_scalar_parameter_and_slice():
  p = node_encoding.encode(Instruction(opcode="parameter", element_type="s32",
                                       parameter_number=4))
  assert p[6] == 1 and p[30] == 4
  assert p[F.SHAPE_DIMS + 7] == 1  # The product of no dims is 1.
  s = node_encoding.encode(Instruction(
      opcode="slice", dims=(4, 6), slice_start=(1, 2), slice_stride=(1, 1),
      slice_limit=(5, 8)))
  np.testing.assert_array_equal(s[109:121], [1, 2, 3, 2, 1, 1, 2, 1, 5, 8, 13,
                                             40])


def test_encode_graph_edges_are_consumer_producer():
  insts = [Instruction(opcode="parameter", dims=(2,)),
           Instruction(opcode="parameter", dims=(2,)),
           Instruction(opcode="add", dims=(2,), operands=(0, 1), is_root=True)]
  feat, opcode, edges = node_encoding.encode_graph(insts)
  assert feat.shape == (3, 140)
  np.testing.assert_array_equal(opcode, [63, 63, 2])
  np.testing.assert_array_equal(edges, [[2, 0], [2, 1]])
