"""Tests for the simulated chip variants (`hardware.CHIPS`, `--chip`)."""

import glob
import os

import numpy as np
import pytest
from scipy import stats

from schemas import npz_format
from simulator import hardware as hw
from simulator import synth
from tpurank import cli

VARIANTS = [name for name in hw.CHIPS if name != hw.DEFAULT_CHIP]
LAYOUT = "layout:xla:random"


def test_default_chip_keeps_the_constants_collections_were_written_with():
  # Collections written before variants existed must stay reproducible.
  d = hw.DEFAULT
  assert (d.hbm_bytes_per_ns, d.mxu_rate("bf16"), d.mxu_rate("f32"),
          d.vpu_flops_per_ns, d.vmem_bytes, d.op_overhead_ns,
          d.tile_overhead_ns, d.lanes, d.sublanes) == (
              800.0, 100e3, 25e3, 8e3, 16 * 2**20, 250.0, 350.0, 128, 8)
  assert d.copy_passes == 2.0 and "add" in d.propagates


def test_variant_tiling_pads_to_its_own_tile():
  wide = hw.CHIPS["wide"]
  assert wide.padded_dims((224, 3), (1, 0)) == [224, 256]
  assert wide.padded_dims((224, 3), (0, 1)) == [256, 16]
  assert hw.DEFAULT.padded_dims((224, 3), (0, 1)) == [256, 8]


def test_unknown_chip_names_the_choices():
  with pytest.raises(ValueError, match="unknown chip 'tpu9'.*default"):
    hw.chip("tpu9")


@pytest.fixture(scope="module")
def priced(tmp_path_factory):
  """The same small collections priced on every chip: {chip: root}."""
  roots = {}
  for name in hw.CHIPS:
    root = str(tmp_path_factory.mktemp(name))
    for c in (LAYOUT, "tile:xla"):
      synth.synth_collection(c, root, graphs=6, seed=2, scale="tiny",
                             progress=False, chip=name)
    roots[name] = root
  return roots


def _files(root, collection):
  return sorted(glob.glob(os.path.join(root, "npz", *collection.split(":"),
                                       "*", "*.npz")))


def _noiseless(path):
  return np.load(npz_format.extra_path(path, synth.NOISELESS_KEY))


@pytest.mark.parametrize("chip", VARIANTS)
def test_variant_prices_the_same_graphs_with_another_ranking(priced, chip):
  taus = []
  for ref, var in zip(_files(priced[hw.DEFAULT_CHIP], LAYOUT),
                      _files(priced[chip], LAYOUT)):
    assert npz_format.validate_file(var) == [], var
    a, b = np.load(ref), np.load(var)
    # The graph and what a config sets are the chip's input, not its output.
    for key in ("node_feat", "node_opcode", "edge_index", "node_config_ids",
                "node_config_feat"):
      np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    runtimes = _noiseless(var)
    assert np.all(np.isfinite(runtimes)) and np.all(runtimes > 0)
    assert not np.allclose(runtimes, _noiseless(ref))
    taus.append(stats.kendalltau(runtimes, _noiseless(ref))[0])
  assert np.nanmean(taus) < 0.99, taus


@pytest.mark.parametrize("chip", VARIANTS)
def test_variant_tile_runtimes_are_valid_and_differ(priced, chip):
  for ref, var in zip(_files(priced[hw.DEFAULT_CHIP], "tile:xla"),
                      _files(priced[chip], "tile:xla")):
    assert npz_format.validate_file(var) == [], var
    runtimes = _noiseless(var)
    assert np.all(np.isfinite(runtimes)) and np.all(runtimes > 0)
    np.testing.assert_array_equal(np.load(ref)["node_feat"],
                                  np.load(var)["node_feat"])
  assert any(not np.array_equal(_noiseless(a), _noiseless(b)) for a, b in zip(
      _files(priced[hw.DEFAULT_CHIP], "tile:xla"),
      _files(priced[chip], "tile:xla")))


def test_cli_chip_is_recorded_and_one_out_holds_one_chip(tmp_path, capsys):
  out = str(tmp_path / "d")
  args = ["synth", "--collection", "tile:xla", "--out", out, "--scale",
          "tiny", "--graphs", "3", "--quiet"]
  assert cli.main(args + ["--chip", "wide"]) == 0
  assert "--chip wide" in open(os.path.join(out, "SIMULATED.md")).read()
  capsys.readouterr()
  assert cli.main(args + ["--chip", "lean"]) == 2
  err = capsys.readouterr()
  lines = (err.out + err.err).strip().splitlines()
  assert len(lines) == 1 and "'wide', not 'lean'" in lines[0], lines
  assert cli.main(args + ["--chip", "wide"]) == 0  # Same chip: rewrites.
