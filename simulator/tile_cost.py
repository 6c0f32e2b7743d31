"""Analytical cost of one fused kernel under a tile-size configuration.

Model (ns; constants from a `hardware.Chip`): the kernel's output is cut into
tiles of
`output_bounds` (convolutions also tile their input features with
`kernel_bounds`). Per tile:

* compute = matrix-unit flops (dot depth / convolution window) plus vector
  work of the elementwise chain (transcendentals count 4x by default), both
  on the *padded* tile (minor dim to the chip's lanes, 128 by default,
  second-minor to its sublanes, 8): tiles that do not match the hardware
  tiling waste work;
* memory = the operand slices the tile reads plus the output it writes;
  small tiles re-read dot operands many times, large ones read them once;
* if the double-buffered working set exceeds on-chip memory, traffic spills
  (a penalty growing with the excess), so the best tile depends on how many
  and how wide the kernel's operands are: on the graph, not the config alone;
* time = tiles x (overhead + max(compute, memory) + a share of the other,
  10% by default).

The compiler's default tiling is the best tiling by the compiler's own
estimate of this cost, an estimate off by a per-config lognormal error
(`COMPILER_ERROR`): like the real compiler's, it is the best or close to
the best measured config (see `benchmarks/bench_realism`). Its runtime is
the normalizer. The measured configs are what an autotuner would try:
tilings the compiler estimates within a per-kernel factor (`SEARCH_RANGE`)
of its default, not every legal tiling, so runtimes span what real kernels
span.
"""

import dataclasses
import math

import numpy as np

from schemas import features as F
from simulator import hardware as hw

# Sigma of the compiler's log-error in estimating a tiling's runtime.
COMPILER_ERROR = 0.08
# Per kernel, the autotuner tries tilings the compiler estimates within a
# factor drawn log-uniformly from this range of its default's estimate.
SEARCH_RANGE = (3.0, 30.0)
# Tilings the compiler considers per kernel (all of them when fewer).
_POOL = 4096


@dataclasses.dataclass
class KernelProfile:
  """What the cost of a kernel depends on, read off its instructions."""
  out_dims: tuple
  out_bytes: int  # Per element.
  mxu_flops_per_elem: float
  mxu_rate: float
  vpu_flops_per_elem: float
  full_operands: float  # Bytes/element of operands shaped like the output.
  row_operands: float  # Bytes/element of operands broadcast along the minor.
  dot_depth: int  # Contracting size of a dot (0 if none).
  dot_in_bytes: int
  conv: tuple  # (k, cin, in_bytes) of a convolution, or ().


def profile(insts: list, chip: hw.Chip = hw.DEFAULT) -> KernelProfile:
  """Summarises a kernel (root = its output) for `chip`'s cost model."""
  root = next(i for i in reversed(insts) if i.is_root)
  out_dims = tuple(root.dims)
  mxu = vpu = 0.0
  rate = chip.mxu_rate(root.element_type)
  dot_depth, dot_in_bytes, conv = 0, 0, ()
  full = row = 0.0
  for inst in insts:
    if inst.opcode == "dot":
      lhs = insts[inst.operands[0]]
      dot_depth = lhs.dims[-1]
      dot_in_bytes = hw.element_bytes(lhs.element_type)
      mxu += 2.0 * dot_depth
      rate = chip.mxu_rate(inst.element_type)
    elif inst.opcode == "convolution":
      k = insts[inst.operands[1]].dims
      conv = (k[0], k[2], hw.element_bytes(inst.element_type))
      mxu += 2.0 * k[0] * k[1] * k[2]
      rate = chip.mxu_rate(inst.element_type)
    elif inst.opcode in ("parameter", "constant", "broadcast"):
      pass
    else:
      size = inst.num_elements / max(np.prod(out_dims, dtype=np.float64), 1)
      vpu += size * (chip.transcendental_flops
                     if inst.opcode in hw.TRANSCENDENTAL else 1.0)
  consumed = {v for i in insts for v in i.operands}
  for u, inst in enumerate(insts):
    if inst.opcode != "parameter" or u not in consumed:
      continue
    users = [i.opcode for i in insts if u in i.operands]
    if "dot" in users or "convolution" in users:
      continue  # Priced by the dot/convolution terms.
    eb = hw.element_bytes(inst.element_type)
    if tuple(inst.dims) == out_dims:
      full += eb
    elif len(inst.dims) == 1:
      row += eb
    else:
      full += eb * inst.num_elements / max(
          np.prod(out_dims, dtype=np.float64), 1)
  return KernelProfile(out_dims, hw.element_bytes(root.element_type), mxu,
                       rate, vpu, full, row, dot_depth, dot_in_bytes, conv)


def tile_options(dim: int, position: int, rank: int,
                 chip: hw.Chip = hw.DEFAULT) -> list[int]:
  """Candidate tile sizes for one output dim (position from the left).

  The most-minor dim tiles in the chip's lanes (multiples of 128 by
  default), the second-minor in its sublanes (multiples of 8), others in
  small counts; the whole dim is always a candidate.
  """
  if position == rank - 1:
    opts = {chip.lanes * i for i in range(1, 17)}
  elif position == rank - 2:
    opts = {chip.sublanes * i
            for i in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)}
  else:
    opts = {1, 2, 3, 4, 6, 8, 12, 16}
  return sorted({t for t in opts if t < dim} | {dim})


def runtime_ns(prof: KernelProfile, out_tile: np.ndarray,
               cin_tile: np.ndarray,
               chip: hw.Chip = hw.DEFAULT) -> np.ndarray:
  """Noiseless runtimes of configs [C, rank] output tiles, [C] cin tiles,
  on `chip` (the one `prof` was read for)."""
  dims = np.array(prof.out_dims, dtype=np.float64)
  t = out_tile.astype(np.float64)
  rank = len(dims)
  n_tiles = np.prod(np.ceil(dims / t), axis=1)
  padded = t.copy()
  padded[:, -1] = np.ceil(padded[:, -1] / chip.lanes) * chip.lanes
  if rank >= 2:
    padded[:, -2] = np.ceil(padded[:, -2] / chip.sublanes) * chip.sublanes
  tile_elems = np.prod(padded, axis=1)
  rows = tile_elems / padded[:, -1]
  compute = tile_elems * (prof.mxu_flops_per_elem / prof.mxu_rate +
                          prof.vpu_flops_per_elem / chip.vpu_flops_per_ns)
  read = tile_elems * prof.full_operands + padded[:, -1] * prof.row_operands
  write = tile_elems * prof.out_bytes
  if prof.dot_depth:
    # A tile reads its rows of the lhs and its columns of the rhs, whole.
    read = read + (rows + padded[:, -1]) * prof.dot_depth * prof.dot_in_bytes
  if prof.conv:
    k, cin, eb = prof.conv
    steps = np.ceil(cin / cin_tile)
    halo = (1 + (k - 1) / np.maximum(t[:, -2], 1))
    read = read + rows * halo * cin * eb + k * k * cin * padded[:, -1] * eb
    # Splitting input features accumulates partial outputs in memory.
    write = write * (2 * steps - 1)
  working = 2 * (read + write)  # Double-buffered.
  spill = 1 + chip.spill_slope * np.maximum(working / chip.vmem_bytes - 1, 0)
  memory = (read + write) * spill / chip.hbm_bytes_per_ns
  per_tile = chip.tile_overhead_ns + np.maximum(compute, memory) + (
      chip.overlap * np.minimum(compute, memory))
  return n_tiles * per_tile


def _in_tiles(sizes) -> list[int]:
  """Tile sizes as the TPU tuning protos count them: the most-minor dim in
  128-lane tiles, the second-minor in 8-sublane tiles, the rest in elements
  (the real kernels' bounds, benchmarks/bench_realism). Always the TPU's
  units, whatever chip priced the runtimes: features never read the chip."""
  out = [int(v) for v in sizes]
  out[-1] = math.ceil(out[-1] / F.TPU_LANES)
  if len(out) >= 2:
    out[-2] = math.ceil(out[-2] / F.TPU_SUBLANES)
  return out


def config_features(prof: KernelProfile, out_tile: np.ndarray,
                    cin_tile: np.ndarray) -> np.ndarray:
  """config_feat [C, 24]: kernel, output and input bounds (6, sum, product),
  in the protos' units (`_in_tiles`)."""
  rows = []
  for t, ci in zip(out_tile, cin_tile):
    kernel_bounds = ()
    if prof.conv:
      k = prof.conv[0]
      kernel_bounds = _in_tiles((k, k, int(ci), int(t[-1])))
    rows.append(
        F.sequence_feature(kernel_bounds, 6, zero_product_on_empty=True) +
        F.sequence_feature(_in_tiles(t), 6, zero_product_on_empty=True) +
        F.sequence_feature((), 6, zero_product_on_empty=True))
  return np.array(rows, dtype=np.float32).reshape(-1,
                                                  F.TILE_CONFIG_FEATURES)


def _pool(prof: KernelProfile, rng: np.random.Generator, chip: hw.Chip):
  """The legal tilings the compiler considers: [P, rank + 1] (output tile,
  input-feature tile), every one when they are few, else a random `_POOL`."""
  rank = len(prof.out_dims)
  options = [tile_options(d, i, rank, chip)
             for i, d in enumerate(prof.out_dims)]
  cin_opts = [0] if not prof.conv else sorted(
      {min(prof.conv[1], c) for c in (8, 16, 32, 64, 128, 256, 512)} |
      {prof.conv[1]})
  options.append(cin_opts)
  total = math.prod(len(o) for o in options)
  if total <= _POOL:
    grid = np.meshgrid(*[np.array(o) for o in options], indexing="ij")
    return np.stack([g.ravel() for g in grid], axis=1).astype(np.int64)
  picks = [np.array(o)[rng.integers(len(o), size=_POOL)] for o in options]
  return np.unique(np.stack(picks, axis=1).astype(np.int64), axis=0)


def sample_configs(prof: KernelProfile, rng: np.random.Generator,
                   count: int, chip: hw.Chip = hw.DEFAULT):
  """The compiler's default and up to `count - 1` other tilings to measure.

  The compiler estimates every tiling of its pool with a lognormal error
  and picks the lowest estimate as its default; the autotuner measures the
  default and a random sample of the tilings estimated within the kernel's
  search factor of it.

  Returns:
    (out_tile [C, rank] int64, cin_tile [C] int64), the default first.
  """
  rank = len(prof.out_dims)
  pool = _pool(prof, rng, chip)
  estimate = runtime_ns(prof, pool[:, :rank], pool[:, rank], chip) * np.exp(
      rng.normal(0.0, COMPILER_ERROR, len(pool)))
  default = int(np.argmin(estimate))
  factor = np.exp(rng.uniform(*np.log(SEARCH_RANGE)))
  near = np.flatnonzero(estimate <= factor * estimate[default])
  near = near[near != default]
  rest = rng.choice(near, min(count - 1, len(near)), replace=False)
  configs = pool[np.concatenate([[default], rest]).astype(np.int64)]
  return configs[:, :rank], configs[:, rank]
