"""An XLA HloModuleProto as a TpuGraphs graph: node order, features, edges.

Node order (the official featurizer's, which `config_index_to_node` indexes
into): the module's computations in the order the proto lists them, and
within each computation its instructions in proto order. XLA serializes
computations callees-first and instructions operands-first (post order), so
this order is topological: every edge points from a later node to an
earlier one. Fused computations, reducers and while bodies/conditions are
nodes like any other.

Edges (rows [u, v]: u consumes v): each instruction's distinct operands,
plus an edge from every instruction that calls a computation (fusion, call,
while, reduce, ...) to that computation's root; distinct rows sorted by
(u, v), as the official encoder's reordered sparse adjacency. `node_splits` are the
official encoder's computation boundaries (`HloEncoder::EncodeHloModule`):
0, the running instruction count after each computation whose name contains
"cluster", "while" or "cond", and the total instruction count last.
"""

import dataclasses

import numpy as np
from tensorflow.compiler.xla import xla_data_pb2

from schemas import node_encoding
from schemas import opcodes
from schemas.errors import fail

_SPLIT_MARKERS = ("cluster", "while", "cond")


@dataclasses.dataclass
class HloGraph:
  """npz arrays of one HLO module, plus what the featurizer kept."""
  node_feat: np.ndarray  # [n, 140] float32
  node_opcode: np.ndarray  # [n] uint8
  edge_index: np.ndarray  # [m, 2] int64
  node_splits: np.ndarray  # [s] int64 boundaries, 0 ... n
  names: list  # [n] "<computation>/<instruction>"

  @property
  def num_nodes(self) -> int:
    return len(self.node_opcode)


def element_type_name(shape) -> str:
  """Lower-case XLA type name as TpuGraphs features spell it."""
  name = xla_data_pb2.PrimitiveType.Name(shape.element_type).lower()
  return {"opaque_type": "opaque", "primitive_type_invalid": "invalid"}.get(
      name, name)


def _window(inst):
  dims = inst.window.dimensions
  if not dims:
    return None
  return node_encoding.Window(
      size=[d.size for d in dims], stride=[d.stride for d in dims],
      padding_low=[d.padding_low for d in dims],
      padding_high=[d.padding_high for d in dims],
      dilation=[d.window_dilation for d in dims],
      base_dilation=[d.base_dilation for d in dims],
      reversal=[d.window_reversal for d in dims])


def _conv_dims(inst):
  if not inst.HasField("convolution_dimension_numbers"):
    return None
  c = inst.convolution_dimension_numbers
  return node_encoding.ConvDims(
      input_batch=c.input_batch_dimension,
      input_feature=c.input_feature_dimension,
      input_spatial=list(c.input_spatial_dimensions),
      kernel_input_feature=c.kernel_input_feature_dimension,
      kernel_output_feature=c.kernel_output_feature_dimension,
      kernel_spatial=list(c.kernel_spatial_dimensions),
      output_batch=c.output_batch_dimension,
      output_feature=c.output_feature_dimension)


def instruction(inst, computation, operands) -> node_encoding.Instruction:
  """One HloInstructionProto as the encoder's Instruction."""
  shape = inst.shape
  layout = (list(shape.layout.minor_to_major)
            if shape.HasField("layout") and shape.dimensions else None)
  slices = inst.slice_dimensions
  pads = inst.padding_config.dimensions
  return node_encoding.Instruction(
      opcode=inst.opcode, element_type=element_type_name(shape),
      dims=list(shape.dimensions), layout=layout, operands=operands,
      tuple_size=len(shape.tuple_shapes),
      parameter_number=inst.parameter_number,
      dimensions=list(inst.dimensions), window=_window(inst),
      conv_dims=_conv_dims(inst),
      feature_group_count=inst.feature_group_count,
      batch_group_count=inst.batch_group_count,
      slice_start=[s.start for s in slices],
      slice_stride=[s.stride for s in slices],
      slice_limit=[s.limit for s in slices],
      dynamic_slice_sizes=list(inst.dynamic_slice_sizes),
      padding_low=[p.edge_padding_low for p in pads],
      padding_high=[p.edge_padding_high for p in pads],
      is_stable=inst.is_stable, is_root=inst.id == computation.root_id)


def from_module(module, source: str = "module") -> HloGraph:
  """Featurizes an `xla.HloModuleProto`.

  Args:
    module: The proto.
    source: Names the input in errors (e.g. the file).

  Raises:
    InputError: An instruction calls a computation the module lacks (the
      official encoder aborts there).
  """
  index, root_index, names = {}, {}, []
  for comp in module.computations:
    for inst in comp.instructions:
      index[(comp.id, inst.id)] = len(names)
      names.append(f"{comp.name}/{inst.name}")
      if inst.id == comp.root_id:
        root_index[comp.id] = index[(comp.id, inst.id)]
  instructions, edges, splits, count = [], [], [0], 0
  for comp in module.computations:
    for inst in comp.instructions:
      u = index[(comp.id, inst.id)]
      edges += [(u, index[(comp.id, o)]) for o in inst.operand_ids]
      for c in inst.called_computation_ids:
        if c not in root_index:
          raise fail(source, f"{comp.name}/{inst.name}.called_computation_ids",
                     "ids of computations in the module", str(c))
        edges.append((u, root_index[c]))
      instructions.append(instruction(inst, comp, ()))
    count += len(comp.instructions)
    if any(m in comp.name for m in _SPLIT_MARKERS):
      splits.append(count)
  if splits[-1] < count:
    splits.append(count)
  node_feat = np.stack([node_encoding.encode(i) for i in instructions])
  node_opcode = np.array([opcodes.opcode_id(i.opcode) for i in instructions],
                         dtype=np.uint8)
  return HloGraph(node_feat.astype(np.float32), node_opcode,
                  node_encoding.canonical_edges(edges),
                  np.array(splits, dtype=np.int64), names)
