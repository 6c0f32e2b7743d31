"""Raw tuning protos -> TpuGraphs `.npz` files (the official layout).

* Layout (`ModuleTuningData`): one graph, the whole program
  (`hlo_graph.from_module`); `node_config_ids` = `config_index_to_node`;
  per run, the 18 config features of each configurable node: the
  minor-to-major dims of up to 3 tensors (its output and operands), 6 each,
  -1 where absent (-1 everywhere = the compiler's choice).
* Tile (`TuningData`): one graph per kernel module; per run, the 24 config
  features: kernel, output and input bounds of its tile-size config, 6
  values + sum + product each; `config_runtime_normalizers` = the runtime
  of the kernel's default run.

Runs that failed (`error`), have no profile or a runtime <= 1 ns are
dropped, as the official pipeline does; runtimes are
`profile.compute_time_ns`.
"""

import os
import re

import numpy as np

from featurize import hlo_graph
from schemas import features as F
from schemas import npz_format
from schemas import tuning_proto
from schemas.errors import fail
from schemas.npz_io import NpzWriter

MAX_TENSORS, MAX_DIMS = 3, 6


def _usable(run) -> bool:
  return (not run.error and run.HasField("profile") and
          run.profile.compute_time_ns > 1)


def layout_config_row(run, num_nodes: int, path: str, i: int) -> np.ndarray:
  """[nc, 18] config features of one layout run."""
  nodes = run.module_config.layout_config.nodes
  if len(nodes) != num_nodes:
    raise fail(path, f"runs[{i}].module_config.layout_config.nodes",
               f"{num_nodes} nodes (one per config_index_to_node entry)",
               str(len(nodes)))
  row = np.full((num_nodes, MAX_TENSORS * MAX_DIMS), -1, dtype=np.float32)
  for j, node in enumerate(nodes):
    if len(node.tensors) > MAX_TENSORS:
      raise fail(path, f"runs[{i}].module_config.layout_config.nodes[{j}]",
                 f"at most {MAX_TENSORS} tensors", str(len(node.tensors)))
    for t, tensor in enumerate(node.tensors):
      dims = list(tensor.dims)[:MAX_DIMS]
      row[j, t * MAX_DIMS:t * MAX_DIMS + len(dims)] = dims
  return row


def tile_config_row(run) -> list[float]:
  """[24] config features of one tile run."""
  t = run.op_config.tile_size_config
  return (F.sequence_feature(t.kernel_bounds, 6, zero_product_on_empty=True) +
          F.sequence_feature(t.output_bounds, 6, zero_product_on_empty=True) +
          F.sequence_feature(t.input_bounds, 6, zero_product_on_empty=True))


def layout_arrays(msg, path: str) -> dict:
  """The npz arrays of a ModuleTuningData."""
  g = hlo_graph.from_module(msg.module)
  ids = np.array(msg.config_index_to_node, dtype=np.int64)
  if not len(ids):
    raise fail(path, "config_index_to_node", "at least one configurable "
               "node", "none")
  if ids.max() >= g.num_nodes:
    raise fail(path, "config_index_to_node", f"node indices < {g.num_nodes}",
               str(int(ids.max())))
  runs = [(i, r) for i, r in enumerate(msg.runs)
          if _usable(r) and r.HasField("module_config")]
  if not runs:
    raise fail(path, "runs", "at least one successful module_config run",
               "none")
  return {
      "node_feat": g.node_feat, "node_opcode": g.node_opcode,
      "edge_index": g.edge_index, "node_config_ids": ids,
      "node_config_feat": np.stack([layout_config_row(r, len(ids), path, i)
                                    for i, r in runs]),
      "config_runtime": np.array([r.profile.compute_time_ns for _, r in runs],
                                 dtype=np.int64),
      "node_splits": g.node_splits.reshape(1, -1)}


def tile_arrays(module_data, path: str, m: int) -> dict:
  """The npz arrays of one kernel of a TuningData."""
  runs = [r for r in module_data.runs if _usable(r)]
  if any(not r.op_config.HasField("tile_size_config") for r in runs):
    raise fail(path, f"modules[{m}].runs", "op_config.tile_size_config in "
               "every run", "a run without one")
  defaults = [r for r in runs if r.is_default]
  if len(defaults) != 1:
    raise fail(path, f"modules[{m}].runs", "exactly one successful "
               "is_default run (the runtime normalizer)", str(len(defaults)))
  g = hlo_graph.from_module(module_data.module)
  return {
      "node_feat": g.node_feat, "node_opcode": g.node_opcode,
      "edge_index": g.edge_index,
      "config_feat": np.array([tile_config_row(r) for r in runs],
                              dtype=np.float32),
      "config_runtime": np.array([r.profile.compute_time_ns for r in runs],
                                 dtype=np.int64),
      "config_runtime_normalizers": np.full(
          len(runs), defaults[0].profile.compute_time_ns, dtype=np.int64)}


def _safe(name: str) -> str:
  return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def graphs(path: str):
  """Yields (kind, stem, arrays) of every graph in a raw tuning file."""
  kind, msg = tuning_proto.read(path)
  stem = _safe(os.path.splitext(os.path.basename(path))[0])
  if kind == tuning_proto.LAYOUT:
    yield kind, stem, layout_arrays(msg, path)
  else:
    for m, module_data in enumerate(msg.modules):
      yield kind, f"{stem}__{_safe(module_data.module.name)}", tile_arrays(
          module_data, path, m)


def featurize(path: str, out_dir: str) -> list[str]:
  """Writes every graph of `path` as `<out_dir>/<stem>.npz`; returns the
  files (each validated against the official format)."""
  os.makedirs(out_dir, exist_ok=True)
  written = []
  for kind, stem, arrays in graphs(path):
    target = os.path.join(out_dir, f"{stem}.npz")
    with NpzWriter(target) as w:
      for key, value in arrays.items():
        w.write(key, value)
    problems = npz_format.validate_file(target, kind)
    if problems:
      raise fail(target, problems[0].field, problems[0].expected,
                 problems[0].found)
    written.append(target)
  return written
