"""Your own TensorFlow function as a TpuGraphs layout graph with candidate
layout configurations, ready for `tpurank rank`.

`compile_hlo` compiles a function with XLA (`experimental_get_compiler_ir`,
stage "hlo_serialized": the HLO module XLA receives, before TPU-specific
passes such as fusion and layout assignment) and `candidates` featurizes it
with the same code as the real protos (`hlo_graph.from_module`).

Configurable nodes are its convolution, dot and reshape instructions (the
layout-sensitive ops of the TpuGraphs layout collections). Each config gives
every configurable node up to 3 tensors (its output, then its first two
operands) a minor-to-major permutation of that tensor's dimensions, or -1
(the compiler's choice). Config 0 leaves everything to the compiler; the
rest are distinct random choices. Runtimes are unknown: `config_runtime` is
all zeros, as in the test split, so `tpurank validate` and `tpurank rank`
accept the file.

Note: the graph is the pre-optimization HLO of this machine's XLA; the
TpuGraphs graphs come from TPU compilations, so a model trained on them sees
a somewhat different graph here.
"""

import dataclasses
import importlib.util
import os
import re
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf
from tensorflow.compiler.xla.service import hlo_pb2

from featurize import hlo_graph
from featurize import tuning
from schemas import npz_format
from schemas.errors import fail
from schemas.npz_io import NpzWriter

CONFIGURABLE = ("convolution", "dot", "reshape")
DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16",
          "s32": "int32", "s8": "int8", "u8": "uint8", "pred": "bool",
          "f64": "float64", "s64": "int64"}


@dataclasses.dataclass
class InputShape:
  dtype: str
  dims: list


def parse_shapes(text: str) -> list[InputShape]:
  """"64x128,bf16:128x256" -> shapes (float32 unless a dtype is given)."""
  shapes = []
  for part in [p.strip() for p in text.split(",") if p.strip()]:
    dtype, _, dims = part.rpartition(":")
    dtype = dtype or "f32"
    if dtype not in DTYPES:
      raise fail("--input-shapes", part, f"a dtype among {sorted(DTYPES)}",
                 repr(dtype))
    if dims in ("", "scalar"):
      shapes.append(InputShape(dtype, []))
      continue
    if not re.fullmatch(r"\d+(x\d+)*", dims):
      raise fail("--input-shapes", part, "dims like 64x128", repr(dims))
    shapes.append(InputShape(dtype, [int(d) for d in dims.split("x")]))
  if not shapes:
    raise fail("--input-shapes", "value", "one shape per argument", "none")
  return shapes


def load_function(spec: str) -> Callable:
  """"path/to/file.py:fn" -> the function."""
  path, _, name = spec.rpartition(":")
  if not path or not name:
    raise fail("--module", "value", "FILE.py:FUNCTION", repr(spec))
  if not os.path.exists(path):
    raise fail(path, "--module", "an existing Python file", "no such file")
  module_spec = importlib.util.spec_from_file_location("tpurank_user_module",
                                                       path)
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  fn = getattr(module, name, None)
  if not callable(fn):
    raise fail(path, name, "a function", "no such callable")
  return fn


def _last_line(text: str) -> str:
  lines = [l.strip() for l in text.splitlines() if l.strip()]
  return lines[-1] if lines else ""


def compile_hlo(fn: Callable, shapes: Sequence[InputShape]):
  """The HloModuleProto XLA compiles `fn` to for these input shapes."""
  specs = [tf.TensorSpec(s.dims, getattr(tf, DTYPES[s.dtype]))
           for s in shapes]
  compiled = tf.function(fn, jit_compile=True)
  try:
    data = compiled.experimental_get_compiler_ir(*specs)(
        stage="hlo_serialized")
  except (TypeError, ValueError, tf.errors.OpError) as e:
    raise fail("--input-shapes", "shapes",
               "shapes the function accepts (one per argument)",
               f"{type(e).__name__}: {_last_line(str(e))}") from e
  return hlo_pb2.HloModuleProto.FromString(data)


def _configurable(module) -> tuple[list[int], list[list[int]]]:
  """Node indices of configurable ops and the ranks of their tensors."""
  index, ranks, dims = 0, [], {}
  for comp in module.computations:
    for inst in comp.instructions:
      dims[(comp.id, inst.id)] = len(inst.shape.dimensions)
  nodes = []
  for comp in module.computations:
    for inst in comp.instructions:
      if inst.opcode in CONFIGURABLE and inst.shape.dimensions:
        nodes.append(index)
        ranks.append([len(inst.shape.dimensions)] + [
            dims[(comp.id, o)] for o in list(inst.operand_ids)[:2]])
      index += 1
  return nodes, ranks


def candidates(module, num_configs: int = 1000, seed: int = 0,
               default_prob: float = 0.5) -> dict:
  """The npz arrays of the module with `num_configs` candidate layouts."""
  g = hlo_graph.from_module(module, module.name)
  nodes, ranks = _configurable(module)
  if not nodes:
    raise fail(module.name, "instructions", "at least one configurable op "
               f"({', '.join(CONFIGURABLE)})", "none")
  rng = np.random.default_rng(seed)
  width = tuning.MAX_TENSORS * tuning.MAX_DIMS
  seen, rows = set(), [np.full((len(nodes), width), -1, np.float32)]
  seen.add(rows[0].tobytes())
  attempts = 0
  while len(rows) < num_configs and attempts < 20 * num_configs:
    attempts += 1
    row = np.full((len(nodes), width), -1, np.float32)
    for j, tensor_ranks in enumerate(ranks):
      for t, rank in enumerate(tensor_ranks[:tuning.MAX_TENSORS]):
        if rank and rng.random() >= default_prob:
          start = t * tuning.MAX_DIMS
          row[j, start:start + rank] = rng.permutation(rank)
    if row.tobytes() not in seen:
      seen.add(row.tobytes())
      rows.append(row)
  return {"node_feat": g.node_feat, "node_opcode": g.node_opcode,
          "edge_index": g.edge_index,
          "node_config_ids": np.array(nodes, dtype=np.int64),
          "node_config_feat": np.stack(rows),
          "config_runtime": np.zeros(len(rows), dtype=np.int64),
          "node_splits": g.node_splits.reshape(1, -1)}


def write_graph(fn: Callable, shapes: Sequence[InputShape], out: str,
                num_configs: int = 1000, seed: int = 0) -> str:
  """Compiles, featurizes and writes `out` (validated); returns it."""
  arrays = candidates(compile_hlo(fn, shapes), num_configs, seed)
  os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
  with NpzWriter(out) as w:
    for key, value in arrays.items():
      w.write(key, value)
  problems = npz_format.validate_file(out, "layout")
  if problems:
    raise fail(out, problems[0].field, problems[0].expected,
               problems[0].found)
  return out
