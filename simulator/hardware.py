"""The simulated TPU-like chip: its constants and the roofline primitives.

These numbers are a documented assumption of the simulator, loosely shaped
like one TPU core; runtimes built from them are simulated, not measured.
"""

import math

import numpy as np

from schemas import features

HBM_BYTES_PER_NS = 800.0  # 800 GB/s off-chip bandwidth.
MXU_FLOPS_PER_NS = {"bf16": 100e3, "f32": 25e3}  # Matrix unit peak.
VPU_FLOPS_PER_NS = 8e3  # Vector unit, elementwise work.
VMEM_BYTES = 16 * 2**20  # On-chip memory for one kernel's tiles.
OP_OVERHEAD_NS = 250.0  # Fixed cost of launching one op.
TILE_OVERHEAD_NS = 350.0  # Fixed cost of one tile iteration.
LANES, SUBLANES = features.TPU_LANES, features.TPU_SUBLANES
TRANSCENDENTAL = frozenset(
    ("exponential", "tanh", "logistic", "log", "rsqrt", "sqrt", "power"))


def element_bytes(element_type: str) -> int:
  return max(features.ELEMENT_BITS.get(element_type, 32) // 8, 1)


def mxu_rate(element_type: str) -> float:
  return MXU_FLOPS_PER_NS.get(element_type, MXU_FLOPS_PER_NS["f32"])


def padded_dims(dims, minor_to_major) -> list[int]:
  """Dims after TPU tiling pads the two most-minor dims of a layout."""
  d = [int(x) for x in dims]
  if len(d) >= 1:
    d[minor_to_major[0]] = math.ceil(d[minor_to_major[0]] / LANES) * LANES
  if len(d) >= 2:
    d[minor_to_major[1]] = math.ceil(d[minor_to_major[1]] / SUBLANES) * SUBLANES
  return d


def padded_bytes(dims, minor_to_major, element_type: str) -> float:
  """Bytes a tensor occupies in HBM in the given layout (padding included)."""
  if not dims:
    return float(element_bytes(element_type))
  return float(np.prod(padded_dims(dims, minor_to_major), dtype=np.float64)
               ) * element_bytes(element_type)


def transfer_ns(num_bytes: float) -> float:
  return num_bytes / HBM_BYTES_PER_NS
