"""Writes TpuGraphs `.npz` files the way the official tools do (test oracle).

An independent reading of google-research-datasets/tpu_graphs, kept apart
from tpurank's own writers so that tests can hold tpurank against it:

* `process_data/xla/featurizers.h` `FeaturizeHloInstruction`: the 140 node
  features, every group written for every instruction;
* `process_data/xla/hlo_encoder.cc` `EncodeHloModule`: node order, edges
  (deduplicated operands, one edge to each called computation's root,
  adjacency reordered row-major), computation boundaries;
* `process_data/xla/graph_features.cc`: uint8 opcodes, int64 edges, ids and
  splits;
* `process_data/xla/tuning_data_iterator.cc`: which runs are kept, the
  layout config features (3 tensors x 6 dims, -1 padded) and the tile
  normalizer (the first kept default run);
* `process_data/xla/featurizers.h` `FeaturizeTileSizeConfig`: 24 tile config
  features (kernel, output, input bounds; empty product 0).

Nothing here imports tpurank's featurizer or encoder; only the opcode id
table (checked against `hlo_opcode.h` elsewhere) and the proto reader.
"""

import numpy as np
from tensorflow.compiler.xla import xla_data_pb2 as xla

from schemas import opcodes

_TYPES = (xla.PRIMITIVE_TYPE_INVALID, xla.PRED, xla.S8, xla.S16, xla.S32,
          xla.S64, xla.U8, xla.U16, xla.U32, xla.U64, xla.F16, xla.F32,
          xla.F64, xla.BF16, xla.C64, xla.C128, xla.TUPLE, xla.OPAQUE_TYPE,
          xla.TOKEN)


def _seq(out, values, k, zero_product_on_empty=False):
  """FixedNumericSequenceFeatures<k>: k leading values, sum, product."""
  values = [int(v) for v in values]
  product = 1
  for v in values:
    product *= v
  out += [float(v) for v in values[:k]] + [0.0] * max(0, k - len(values))
  out.append(float(sum(values)))
  out.append(0.0 if not values and zero_product_on_empty else float(product))


def _head(out, values, k):
  """FixedNumericSequenceFeaturesNoAggregate<k>."""
  values = [float(v) for v in values][:k]
  out += values + [0.0] * (k - len(values))


def _bools(out, values, k):
  """FeaturizeVariableLengthBools<k>: k leading flags, true and false count."""
  flags = [bool(v) for v in values]
  _head(out, [float(f) for f in flags], k)
  out += [float(sum(flags)), float(len(flags) - sum(flags))]


def node_features(inst, comp) -> list:
  out = [float(inst.id == comp.root_id), 0.0]
  shape = inst.shape
  out += [float(t == shape.element_type) for t in _TYPES]
  _seq(out, shape.dimensions, 6)
  out.append(float(len(shape.tuple_shapes)))
  out.append(float(inst.parameter_number))
  _head(out, inst.dimensions, 6)
  dims = inst.window.dimensions
  for name in ("size", "stride", "padding_low", "padding_high",
               "window_dilation", "base_dilation"):
    _seq(out, [getattr(d, name) for d in dims], 6)
  _bools(out, [d.window_reversal for d in dims], 6)
  c = inst.convolution_dimension_numbers
  out += [c.input_batch_dimension, c.input_feature_dimension]
  _head(out, c.input_spatial_dimensions, 4)
  out += [c.kernel_input_feature_dimension, c.kernel_output_feature_dimension]
  _head(out, c.kernel_spatial_dimensions, 4)
  out += [c.output_batch_dimension, c.output_feature_dimension]
  out += [float(inst.feature_group_count), float(inst.batch_group_count)]
  for name in ("start", "stride", "limit"):
    _seq(out, [getattr(s, name) for s in inst.slice_dimensions], 2)
  _seq(out, inst.dynamic_slice_sizes, 2)
  pads = inst.padding_config.dimensions
  _seq(out, [p.edge_padding_low for p in pads], 2)
  _seq(out, [p.edge_padding_high for p in pads], 2)
  out.append(float(inst.is_stable))
  _head(out, shape.layout.minor_to_major, 6)
  assert len(out) == 140
  return out


def encode_module(module) -> dict:
  """node_feat, node_opcode, edge_index, node_splits of an HloModuleProto."""
  index = {}
  for comp in module.computations:
    for inst in comp.instructions:
      index[inst.id] = len(index)
  roots = {comp.id: comp.root_id for comp in module.computations}
  feats, ops, edges, splits, count = [], [], [], [0], 0
  for comp in module.computations:
    for inst in comp.instructions:
      ops.append(opcodes.opcode_id(inst.opcode))
      feats.append(node_features(inst, comp))
      for operand in sorted(set(inst.operand_ids)):
        edges.append((index[inst.id], index[operand]))
      for callee in inst.called_computation_ids:
        edges.append((index[inst.id], index[roots[callee]]))
    count += len(comp.instructions)
    if any(m in comp.name for m in ("cluster", "while", "cond")):
      splits.append(count)
  if splits[-1] < count:
    splits.append(count)
  edges = sorted(edges)
  assert len(set(edges)) == len(edges), "the official encoder CHECK-fails"
  return {"node_feat": np.array(feats, np.float32),
          "node_opcode": np.array(ops, np.uint8),
          "edge_index": np.array(edges, np.int64).reshape(-1, 2),
          "node_splits": np.array(splits, np.int64)}


def layout_arrays(msg) -> dict:
  """The npz of a ModuleTuningData (node_splits shaped (1, s) as released)."""
  arrays = encode_module(msg.module)
  runs = [r for r in msg.runs if r.HasField("module_config") and not r.error
          and r.HasField("profile")]
  feat = np.full((len(runs), len(msg.config_index_to_node), 18), -1,
                 np.float32)
  for j, run in enumerate(runs):
    for k, node in enumerate(run.module_config.layout_config.nodes):
      for t, tensor in enumerate(node.tensors):
        dims = list(tensor.dims)[:6]
        feat[j, k, 6 * t:6 * t + len(dims)] = dims
  arrays.update(
      node_config_ids=np.array(msg.config_index_to_node, np.int64),
      node_config_feat=feat,
      config_runtime=np.array([r.profile.compute_time_ns for r in runs],
                              np.int64))
  arrays["node_splits"] = arrays["node_splits"].reshape(1, -1)
  return arrays


def tile_arrays(module_data) -> dict:
  """The npz of one kernel of a TuningData (a kernel the iterator keeps)."""
  arrays = encode_module(module_data.module)
  del arrays["node_splits"]
  runs = [r for r in module_data.runs
          if not r.error and r.profile.compute_time_ns > 1]
  default = next(r for r in runs if r.is_default)
  feat = []
  for run in runs:
    t, row = run.op_config.tile_size_config, []
    for bounds in (t.kernel_bounds, t.output_bounds, t.input_bounds):
      _seq(row, bounds, 6, zero_product_on_empty=True)
    feat.append(row)
  arrays.update(
      config_feat=np.array(feat, np.float32),
      config_runtime=np.array([r.profile.compute_time_ns for r in runs],
                              np.int64),
      config_runtime_normalizers=np.full(
          len(runs), default.profile.compute_time_ns, np.int64))
  return arrays


def as_test_split(arrays: dict) -> dict:
  """A test-split copy: runtimes (and normalizers) removed, i.e. zero."""
  out = dict(arrays)
  for key in ("config_runtime", "config_runtime_normalizers"):
    if key in out:
      out[key] = np.zeros_like(out[key])
  return out


def write(path: str, arrays: dict):
  np.savez_compressed(path, **arrays)
