"""Tests that the simulated costs behave like the documented model."""

import numpy as np

from schemas.node_encoding import Instruction
from simulator import hardware as hw
from simulator import layout_cost
from simulator import tile_cost


def test_padding_follows_layout():
  # A dim of 3 placed most-minor pads to 128 lanes.
  assert hw.DEFAULT.padded_dims((224, 3), (1, 0)) == [224, 128]
  assert hw.DEFAULT.padded_dims((224, 3), (0, 1)) == [256, 8]
  assert hw.DEFAULT.padded_bytes((224, 3), (0, 1), "bf16") < (
      hw.DEFAULT.padded_bytes((224, 3), (1, 0), "bf16"))


def _dot_program(consumer):
  insts = [Instruction("parameter", dims=(128, 256), layout=(1, 0)),
           Instruction("parameter", dims=(256, 128), layout=(1, 0)),
           Instruction("dot", dims=(128, 128), layout=(1, 0), operands=(0, 1))]
  if consumer == "reduce":
    insts.append(Instruction("constant", dims=()))
    insts.append(Instruction("reduce", dims=(128,), operands=(2, 3),
                             dimensions=(1,)))
    insts.append(Instruction("tuple", element_type="tuple", operands=(4,),
                             is_root=True))
  else:
    insts.append(Instruction("tuple", element_type="tuple", operands=(2,),
                             is_root=True))
  return insts


def _best_out_layout(insts):
  rng = np.random.default_rng(0)
  model = layout_cost.build(insts, np.array([2]), rng)
  out = model.variables[0]
  assert out.slot == 0
  layouts = [out.default_perm] + out.perms
  return layouts[int(np.argmin(out.unary))]


def test_best_layout_depends_on_the_consumers():
  # Same dot, same configs: a program output wants XLA's default layout,
  # a reduction over dim 1 wants dim 1 out of the minor position.
  assert _best_out_layout(_dot_program("tuple")) == (1, 0)
  assert _best_out_layout(_dot_program("reduce")) == (0, 1)


def test_runtimes_vectorised_match_terms():
  rng = np.random.default_rng(1)
  insts = _dot_program("reduce")
  model = layout_cost.build(insts, np.array([2]), rng)
  sizes = [v.num_options for v in model.variables]
  choices = np.stack([rng.integers(s, size=50) for s in sizes], axis=1)
  got = model.runtimes(choices)
  for row in range(5):
    want = model.base + sum(v.unary[choices[row, i]]
                            for i, v in enumerate(model.variables))
    want += sum(m[choices[row, a], choices[row, b]]
                for (a, b), m in model.pairs.items())
    assert np.isclose(got[row], want)
  feats = model.features(choices, 1)
  assert feats.shape == (50, 1, 18)
  assert np.all(feats[choices[:, 0] == 0, 0, :6] == -1)


def _profile(full_operands):
  return tile_cost.KernelProfile(
      out_dims=(4096, 4096), out_bytes=4, mxu_flops_per_elem=0.0,
      mxu_rate=hw.DEFAULT.mxu_rate("f32"), vpu_flops_per_elem=3.0,
      full_operands=full_operands, row_operands=4.0, dot_depth=0,
      dot_in_bytes=0, conv=())


def test_best_tile_depends_on_the_kernel_operands():
  tiles = np.array([[r, c] for r in (8, 64, 256, 512, 4096)
                    for c in (128, 512, 2048, 4096)])
  cin = np.zeros(len(tiles))
  few = tile_cost.runtime_ns(_profile(4.0), tiles, cin)
  many = tile_cost.runtime_ns(_profile(64.0), tiles, cin)
  # With many operands the large tiles spill on-chip memory.
  assert tuple(tiles[np.argmin(few)]) != tuple(tiles[np.argmin(many)])
  assert tiles[np.argmin(many)].prod() < tiles[np.argmin(few)].prod()


def test_tile_padding_waste_costs():
  prof = _profile(4.0)
  aligned, ragged = tile_cost.runtime_ns(
      prof, np.array([[256, 512], [256, 500]]), np.zeros(2))
  assert ragged > aligned
