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

Runs are kept as the official iterators (`tuning_data_iterator.cc`) keep
them; runtimes are `profile.compute_time_ns`:

* layout: runs with a `module_config`, no `error` and a profile
  (`ModuleTuningDataIterator::LoadData`); a kept run with runtime 0 is an
  error (the official code CHECK-fails) and so is a program without a kept
  `is_default` run (the official iterator then emits no sample);
* tile: a kernel is skipped, and reported, when it has at most one run or
  any run lacks `op_config.tile_size_config` (`OpTuningDataIterator::
  LoadData` / `LoadModuleTuningProto`); of its runs, those without `error`
  and with a runtime > 1 ns are kept, and the first kept `is_default` run is
  the normalizer of all of them (none is an error).
"""

import os
import re
from typing import NamedTuple, Optional

import numpy as np

from featurize import hlo_graph
from schemas import features as F
from schemas import npz_format
from schemas import tuning_proto
from schemas.errors import Problem, fail
from schemas.npz_io import NpzWriter

MAX_TENSORS, MAX_DIMS = 3, 6


class Featurized(NamedTuple):
  """What one raw tuning file became.

  Attributes:
    files: The `.npz` files written, each validated.
    skipped: One problem per kernel the official pipeline leaves out.
  """
  files: list
  skipped: list


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
  g = hlo_graph.from_module(msg.module, path)
  ids = np.array(msg.config_index_to_node, dtype=np.int64)
  if not len(ids):
    raise fail(path, "config_index_to_node", "at least one configurable "
               "node", "none")
  if ids.max() >= g.num_nodes:
    raise fail(path, "config_index_to_node", f"node indices < {g.num_nodes}",
               str(int(ids.max())))
  runs = [(i, r) for i, r in enumerate(msg.runs) if r.HasField(
      "module_config") and not r.error and r.HasField("profile")]
  for i, r in runs:
    if r.profile.compute_time_ns <= 0:
      raise fail(path, f"runs[{i}].profile.compute_time_ns",
                 "a positive runtime in a successful run",
                 str(r.profile.compute_time_ns))
  if not any(r.is_default for _, r in runs):
    raise fail(path, "runs", "a successful is_default run (the compiler's "
               "own layout)", "none")
  return {
      "node_feat": g.node_feat, "node_opcode": g.node_opcode,
      "edge_index": g.edge_index, "node_config_ids": ids,
      "node_config_feat": np.stack([layout_config_row(r, len(ids), path, i)
                                    for i, r in runs]),
      "config_runtime": np.array([r.profile.compute_time_ns for _, r in runs],
                                 dtype=np.int64),
      "node_splits": g.node_splits.reshape(1, -1)}


def tile_skip_reason(module_data) -> Optional[str]:
  """Why the official pipeline leaves a kernel out, or None."""
  if not module_data.HasField("module"):
    return "no module"
  if len(module_data.runs) <= 1:
    return f"{len(module_data.runs)} run(s), at least 2 needed to rank"
  if any(not r.op_config.HasField("tile_size_config")
         for r in module_data.runs):
    return "a run without op_config.tile_size_config"
  return None


def tile_arrays(module_data, path: str, m: int) -> dict:
  """The npz arrays of one kernel of a TuningData (not a skipped one)."""
  runs = [r for r in module_data.runs
          if not r.error and r.profile.compute_time_ns > 1]
  defaults = [r for r in runs if r.is_default]
  if not defaults:
    raise fail(path, f"modules[{m}].runs", "a successful is_default run "
               "(the runtime normalizer)", "none")
  g = hlo_graph.from_module(module_data.module, path)
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
  """Yields (kind, stem, arrays or a skip Problem) per graph of a file."""
  kind, msg = tuning_proto.read(path)
  stem = _safe(os.path.splitext(os.path.basename(path))[0])
  if kind == tuning_proto.LAYOUT:
    yield kind, stem, layout_arrays(msg, path)
  else:
    for m, module_data in enumerate(msg.modules):
      name = f"{stem}__{_safe(module_data.module.name)}"
      reason = tile_skip_reason(module_data)
      if reason:
        yield kind, name, Problem(path, f"modules[{m}]", "a kernel the "
                                  "official pipeline keeps", reason)
      else:
        yield kind, name, tile_arrays(module_data, path, m)


def featurize(path: str, out_dir: str) -> Featurized:
  """Writes every kept graph of `path` as `<out_dir>/<stem>.npz`.

  Returns:
    The files (each validated against the official format) and the
    kernels skipped as the official pipeline skips them.
  """
  os.makedirs(out_dir, exist_ok=True)
  written, skipped = [], []
  for kind, stem, arrays in graphs(path):
    if isinstance(arrays, Problem):
      skipped.append(arrays)
      continue
    target = os.path.join(out_dir, f"{stem}.npz")
    with NpzWriter(target) as w:
      for key, value in arrays.items():
        w.write(key, value)
    problems = npz_format.validate_file(target, kind)
    if problems:
      raise fail(target, problems[0].field, problems[0].expected,
                 problems[0].found)
    written.append(target)
  return Featurized(written, skipped)
