"""Encodes one HLO instruction as the 140 TpuGraphs node features.

Both producers of graphs use it: the simulator (synthetic instructions) and
the featurizer of real HLO protos, so both lay features out identically.
"""

import dataclasses
from typing import Optional, Sequence

import numpy as np

from schemas import features as F
from schemas import opcodes


@dataclasses.dataclass
class Window:
  """One convolution / reduce-window window, per spatial dimension."""
  size: Sequence[int]
  stride: Sequence[int]
  padding_low: Sequence[int]
  padding_high: Sequence[int]
  dilation: Sequence[int]
  base_dilation: Sequence[int]
  reversal: Sequence[bool]


_NO_WINDOW = Window((), (), (), (), (), (), ())


@dataclasses.dataclass
class ConvDims:
  """Convolution dimension numbers."""
  input_batch: int
  input_feature: int
  input_spatial: Sequence[int]
  kernel_input_feature: int
  kernel_output_feature: int
  kernel_spatial: Sequence[int]
  output_batch: int
  output_feature: int


@dataclasses.dataclass
class Instruction:
  """The parts of an HLO instruction that TpuGraphs features describe.

  Attributes:
    opcode: HLO opcode name, e.g. "dot".
    element_type: Lower-case XLA type name ("f32", "bf16", "tuple", ...).
    dims: Shape dimensions (empty for scalars and tuples).
    layout: minor_to_major of the shape's layout, or None.
    operands: Indices (in the graph) of the instructions it consumes.
    tuple_size: Number of tuple elements, for tuple shapes.
    parameter_number: For parameters.
    dimensions: The `dimensions` attribute (reshape, reduce, broadcast, ...).
    window: Window of a convolution or reduce-window.
    conv_dims: Convolution dimension numbers.
    feature_group_count: Convolution feature groups.
    batch_group_count: Convolution batch groups.
    slice_start, slice_stride, slice_limit: Slice bounds.
    dynamic_slice_sizes: Sizes of a dynamic-slice.
    padding_low, padding_high: Edge padding of a pad.
    is_stable: For sort.
    is_root: Whether it is the root of its computation.
  """
  opcode: str
  element_type: str = "f32"
  dims: Sequence[int] = ()
  layout: Optional[Sequence[int]] = None
  operands: Sequence[int] = ()
  tuple_size: int = 0
  parameter_number: int = 0
  dimensions: Sequence[int] = ()
  window: Optional[Window] = None
  conv_dims: Optional[ConvDims] = None
  feature_group_count: int = 0
  batch_group_count: int = 0
  slice_start: Sequence[int] = ()
  slice_stride: Sequence[int] = ()
  slice_limit: Sequence[int] = ()
  dynamic_slice_sizes: Sequence[int] = ()
  padding_low: Sequence[int] = ()
  padding_high: Sequence[int] = ()
  is_stable: bool = False
  is_root: bool = False

  @property
  def num_elements(self) -> int:
    return int(np.prod(self.dims, dtype=np.int64)) if self.dims else 1

  @property
  def num_bytes(self) -> int:
    return self.num_elements * F.ELEMENT_BITS.get(self.element_type, 32) // 8


def _put(vec: np.ndarray, start: int, values: list[float]):
  vec[start:start + len(values)] = values


def encode(inst: Instruction) -> np.ndarray:
  """Returns the [140] float32 feature vector of one instruction."""
  v = np.zeros(F.NODE_FEATURES, dtype=np.float32)
  v[F.IS_ROOT] = float(inst.is_root)
  # featurizers.h FeaturizePrimitiveType: a type outside the 19 listed
  # (e.g. f8e5m2, s4) sets none of them.
  if inst.element_type in F.ELEMENT_TYPES:
    v[F.ELEMENT_TYPE + F.ELEMENT_TYPES.index(inst.element_type)] = 1.0
  _put(v, F.SHAPE_DIMS, F.sequence_feature(inst.dims, F.MAX_RANK))
  v[F.TUPLE_SHAPES_SIZE] = inst.tuple_size
  v[F.PARAMETER_NUMBER] = inst.parameter_number
  _put(v, F.DIMENSIONS, [float(d) for d in list(inst.dimensions)[:F.MAX_RANK]])
  # featurizers.h writes the window, slice, dynamic-slice and padding groups
  # for every instruction, so an op without them has products of 1.
  w = inst.window or _NO_WINDOW
  for start, seq in ((F.WINDOW_SIZE, w.size), (F.WINDOW_STRIDE, w.stride),
                     (F.WINDOW_PADDING_LOW, w.padding_low),
                     (F.WINDOW_PADDING_HIGH, w.padding_high),
                     (F.WINDOW_DILATION, w.dilation),
                     (F.WINDOW_BASE_DILATION, w.base_dilation)):
    _put(v, start, F.sequence_feature(seq, F.MAX_RANK))
  rev = [float(bool(r)) for r in w.reversal]
  _put(v, F.WINDOW_REVERSAL, rev[:F.MAX_RANK])
  v[F.WINDOW_REVERSAL + 6] = sum(rev)
  v[F.WINDOW_REVERSAL + 7] = len(rev) - sum(rev)
  c = inst.conv_dims
  if c is not None:
    v[F.CONV_INPUT_BATCH_DIM] = c.input_batch
    v[F.CONV_INPUT_FEATURE_DIM] = c.input_feature
    _put(v, F.CONV_INPUT_SPATIAL_DIMS, [float(d) for d in c.input_spatial[:4]])
    v[F.CONV_KERNEL_INPUT_FEATURE_DIM] = c.kernel_input_feature
    v[F.CONV_KERNEL_OUTPUT_FEATURE_DIM] = c.kernel_output_feature
    _put(v, F.CONV_KERNEL_SPATIAL_DIMS,
         [float(d) for d in c.kernel_spatial[:4]])
    v[F.CONV_OUTPUT_BATCH_DIM] = c.output_batch
    v[F.CONV_OUTPUT_FEATURE_DIM] = c.output_feature
  v[F.FEATURE_GROUP_COUNT] = inst.feature_group_count
  v[F.BATCH_GROUP_COUNT] = inst.batch_group_count
  for start, seq in ((F.SLICE_START, inst.slice_start),
                     (F.SLICE_STRIDE, inst.slice_stride),
                     (F.SLICE_LIMIT, inst.slice_limit),
                     (F.DYNAMIC_SLICE_SIZES, inst.dynamic_slice_sizes),
                     (F.PADDING_LOW, inst.padding_low),
                     (F.PADDING_HIGH, inst.padding_high)):
    _put(v, start, F.sequence_feature(seq, 2))
  v[F.IS_STABLE] = float(inst.is_stable)
  if inst.layout is not None:
    _put(v, F.LAYOUT_MINOR_TO_MAJOR,
         [float(d) for d in list(inst.layout)[:F.MAX_RANK]])
  return v


def canonical_edges(edges) -> np.ndarray:
  """Edge rows [consumer, producer] as the official encoder writes them.

  `hlo_encoder.cc` keeps each operand once (`DeduplicateField`), reorders
  the sparse adjacency row-major (`ReorderSparseTensor`) and checks rows are
  unique: int64 rows, distinct, sorted by (u, v).
  """
  return np.unique(np.asarray(edges, dtype=np.int64).reshape(-1, 2), axis=0)


def encode_graph(instructions: Sequence[Instruction]):
  """Encodes a topologically ordered instruction list as npz arrays.

  Returns:
    (node_feat [n, 140] float32, node_opcode [n] uint8,
     edge_index [m, 2] int64 with rows [consumer, producer], sorted).
  """
  node_feat = np.stack([encode(i) for i in instructions]).astype(np.float32)
  node_opcode = np.array([opcodes.opcode_id(i.opcode) for i in instructions],
                         dtype=np.uint8)
  edge_index = canonical_edges(
      [(u, v) for u, inst in enumerate(instructions) for v in inst.operands])
  return node_feat, node_opcode, edge_index
