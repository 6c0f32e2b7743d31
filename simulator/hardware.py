"""The simulated TPU-like chips: their constants and roofline primitives.

A `Chip` is a documented assumption of the simulator, loosely shaped like one
TPU-like core; runtimes built from it are SIMULATED, not measured. `CHIPS`
holds the variants `tpurank synth --chip` offers. "default" is the chip every
collection was simulated with before variants existed (same bytes); the
others change what a cost depends on, not just its scale: the hardware tile,
bandwidth against matrix-unit and vector rates, launch and tile overheads,
on-chip memory, how dearly a bad operand layout slows the matrix unit, which
ops inherit their operand's layout and how many times a layout change
crosses memory. They exist to test that a model learns layouts from the
graph rather than the quirks of one cost model (`benchmarks/bench_chips`).

The model's features never read a chip: they give each layout's padding
under every real TPU tiling choice (`schemas.features.TILE_LANE_CHOICES`,
`TILE_SUBLANE_CHOICES`), and the model learns from the runtimes which one the
chip has (`trainer.learned_tiling`).
"""

import dataclasses
import math

import numpy as np

from schemas import features

_ELEMENTWISE_UNARY = frozenset((
    "exponential", "tanh", "logistic", "negate", "abs", "rsqrt", "sqrt", "log",
    "convert"))
_ELEMENTWISE = _ELEMENTWISE_UNARY | frozenset((
    "add", "multiply", "subtract", "maximum", "minimum", "divide", "power",
    "select", "compare"))
TRANSCENDENTAL = frozenset(
    ("exponential", "tanh", "logistic", "log", "rsqrt", "sqrt", "power"))


@dataclasses.dataclass(frozen=True)
class Chip:
  """One simulated chip (times in ns, sizes in bytes).

  Attributes:
    name: Its key in `CHIPS`.
    hbm_bytes_per_ns: Off-chip bandwidth (800.0 = 800 GB/s).
    mxu_bf16_flops_per_ns: Matrix-unit peak for bf16.
    mxu_f32_flops_per_ns: Matrix-unit peak for f32 and other types.
    vpu_flops_per_ns: Vector unit, elementwise work.
    vmem_bytes: On-chip memory for one kernel's tiles.
    op_overhead_ns: Fixed cost of launching one op.
    tile_overhead_ns: Fixed cost of one tile iteration.
    lanes: The hardware tile's most-minor size (layouts pad to it).
    sublanes: The hardware tile's second-minor size.
    transcendental_flops: Vector flops per element of a transcendental op.
    spill_slope: Growth of memory traffic per unit of working set over VMEM.
    overlap: Share of the shorter of compute and memory not hidden.
    dot_bad_input: Matrix-unit slowdown (share of the dot's compute) when a
      dot reads its lhs without the contracting dim minor.
    conv_bad_input: The same for a convolution's input feature dim.
    kernel_bad: The same for the second operand (kernel) of either.
    cross_lane: Extra traffic (share) of reducing over the most-minor dim.
    propagates: Opcodes that inherit their first operand's layout.
    copy_passes: Times a layout-changing copy moves its tensor through HBM.
  """
  name: str
  hbm_bytes_per_ns: float
  mxu_bf16_flops_per_ns: float
  mxu_f32_flops_per_ns: float
  vpu_flops_per_ns: float
  vmem_bytes: float
  op_overhead_ns: float
  tile_overhead_ns: float
  lanes: int
  sublanes: int
  transcendental_flops: float
  spill_slope: float
  overlap: float
  dot_bad_input: float
  conv_bad_input: float
  kernel_bad: float
  cross_lane: float
  propagates: frozenset
  copy_passes: float

  def mxu_rate(self, element_type: str) -> float:
    if element_type == "bf16":
      return self.mxu_bf16_flops_per_ns
    return self.mxu_f32_flops_per_ns

  def padded_dims(self, dims, minor_to_major) -> list[int]:
    """Dims after the chip's tiling pads the two most-minor dims."""
    d = [int(x) for x in dims]
    if len(d) >= 1:
      m = minor_to_major[0]
      d[m] = math.ceil(d[m] / self.lanes) * self.lanes
    if len(d) >= 2:
      m = minor_to_major[1]
      d[m] = math.ceil(d[m] / self.sublanes) * self.sublanes
    return d

  def padded_bytes(self, dims, minor_to_major, element_type: str) -> float:
    """Bytes a tensor occupies in HBM in the given layout (padding included)."""
    if not dims:
      return float(element_bytes(element_type))
    return float(np.prod(self.padded_dims(dims, minor_to_major),
                         dtype=np.float64)) * element_bytes(element_type)

  def transfer_ns(self, num_bytes: float) -> float:
    return num_bytes / self.hbm_bytes_per_ns


def element_bytes(element_type: str) -> int:
  return max(features.ELEMENT_BITS.get(element_type, 32) // 8, 1)


DEFAULT_CHIP = "default"
CHIPS = {
    # Loosely one TPU core; every collection before variants came from it.
    "default": Chip(
        "default", hbm_bytes_per_ns=800.0, mxu_bf16_flops_per_ns=100e3,
        mxu_f32_flops_per_ns=25e3, vpu_flops_per_ns=8e3,
        vmem_bytes=16 * 2**20, op_overhead_ns=250.0, tile_overhead_ns=350.0,
        lanes=features.TPU_LANES, sublanes=features.TPU_SUBLANES,
        transcendental_flops=4.0, spill_slope=2.0, overlap=0.1,
        dot_bad_input=0.35, conv_bad_input=0.8, kernel_bad=0.2,
        cross_lane=0.5, propagates=_ELEMENTWISE, copy_passes=2.0),
    # A bigger chip: 16 x 256 tiles, compute far ahead of bandwidth (so
    # padding and copies cost relatively more), dear launches and cheap
    # tiles, bad dot layouts hurt more than bad convolution ones, only
    # unary elementwise ops inherit a layout, copies stage through VMEM.
    "wide": Chip(
        "wide", hbm_bytes_per_ns=1600.0, mxu_bf16_flops_per_ns=400e3,
        mxu_f32_flops_per_ns=50e3, vpu_flops_per_ns=32e3,
        vmem_bytes=64 * 2**20, op_overhead_ns=600.0, tile_overhead_ns=150.0,
        lanes=256, sublanes=16, transcendental_flops=8.0, spill_slope=4.0,
        overlap=0.3, dot_bad_input=0.7, conv_bad_input=0.3, kernel_bad=0.5,
        cross_lane=1.0, propagates=_ELEMENTWISE_UNARY, copy_passes=3.0),
    # A small inference chip: 16 x 128 tiles, slow memory, a weak f32 matrix
    # unit, cheap launches, little VMEM, convolutions hate a bad layout,
    # copies partly fused into their consumer.
    "lean": Chip(
        "lean", hbm_bytes_per_ns=300.0, mxu_bf16_flops_per_ns=30e3,
        mxu_f32_flops_per_ns=4e3, vpu_flops_per_ns=2e3,
        vmem_bytes=4 * 2**20, op_overhead_ns=80.0, tile_overhead_ns=600.0,
        lanes=features.TPU_LANES, sublanes=16, transcendental_flops=2.0,
        spill_slope=1.0, overlap=0.05, dot_bad_input=0.15,
        conv_bad_input=1.5, kernel_bad=0.1, cross_lane=0.25,
        propagates=_ELEMENTWISE, copy_passes=1.5),
}
DEFAULT = CHIPS[DEFAULT_CHIP]


def chip(name: str) -> Chip:
  """The chip called `name`; ValueError naming the choices otherwise."""
  if name not in CHIPS:
    raise ValueError(f"unknown chip {name!r}: expected one of "
                     f"{', '.join(CHIPS)}")
  return CHIPS[name]
