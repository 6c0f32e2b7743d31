"""Tests for the simulated collections: format, determinism, realism."""

import glob
import os

import numpy as np
import pytest
from scipy import stats

from schemas import npz_format
from schemas import opcodes
from simulator import synth


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
  out = str(tmp_path_factory.mktemp("synth"))
  for c in npz_format.COLLECTIONS:
    synth.synth_collection(c, out, graphs=5, seed=3, scale="tiny",
                           progress=False)
  return out


def _files(root, collection):
  return sorted(glob.glob(os.path.join(root, "npz", *collection.split(":"),
                                       "*", "*.npz")))


def test_official_layout_and_every_file_valid(tiny):
  for c in npz_format.COLLECTIONS:
    for split, count in synth.split_counts(5).items():
      folder = npz_format.collection_dir(tiny, c, split)
      files = glob.glob(os.path.join(folder, "*.npz"))
      assert len(files) == count, (c, split)
      for f in files:
        assert npz_format.validate_file(f) == [], f


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
  for name, seed in (("a", 7), ("b", 7), ("c", 8)):
    synth.synth_collection("layout:xla:random", str(tmp_path / name), 3, seed,
                           "tiny", progress=False)
  a, b, c = (_files(str(tmp_path / n), "layout:xla:random") for n in "abc")
  assert [open(x, "rb").read() for x in a] == [open(x, "rb").read() for x in b]
  assert open(a[0], "rb").read() != open(c[0], "rb").read()


def test_graphs_look_like_hlo(tiny):
  ops = np.concatenate([npz_format.load_graph(f).node_opcode
                        for c in npz_format.COLLECTIONS[1:]
                        for f in _files(tiny, c)])
  names = {opcodes.opcode_name(o) for o in np.unique(ops)}
  assert {"parameter", "constant", "broadcast", "reduce", "tuple",
          "reshape"} <= names
  assert {"dot", "convolution"} & names
  assert not np.any(ops == opcodes.UNKNOWN_OPCODE)


def test_noiseless_runtimes_recorded_and_noise_is_small(tiny):
  for c in ("tile:xla", "layout:xla:random"):
    for f in _files(tiny, c):
      g = npz_format.load_graph(f)
      noiseless = g.read_extra(synth.NOISELESS_KEY)
      assert noiseless.shape == (g.num_configs,)
      ratio = np.log(g.config_runtime / noiseless)
      sigma = synth.TILE_NOISE if c.startswith("tile") else synth.LAYOUT_NOISE
      assert np.all(np.abs(ratio) < 6 * sigma + 1e-3)


def test_default_search_is_narrower_than_random(tmp_path):
  spreads = {}
  for search in ("random", "default"):
    c = f"layout:xla:{search}"
    synth.synth_collection(c, str(tmp_path), 6, 0, "small", progress=False)
    spreads[search] = np.median([
        np.subtract(*np.percentile(np.log(g.config_runtime), [75, 25]))
        for g in map(npz_format.load_graph, _files(str(tmp_path), c))])
  # Interquartile range of log runtime: the bulk of a default search sits
  # near the compiler default.
  assert spreads["default"] < spreads["random"] / 3


def test_first_layout_config_is_compiler_default(layout_npz):
  g = npz_format.load_graph(layout_npz)
  first = next(g.iter_config_feat(1))
  assert np.all(first == -1)


def test_noise_ceiling_is_below_one_and_informative(tiny):
  taus = []
  for f in _files(tiny, "layout:nlp:random"):
    g = npz_format.load_graph(f)
    taus.append(stats.kendalltau(g.read_extra(synth.NOISELESS_KEY),
                                 g.config_runtime)[0])
  assert 0.5 < np.mean(taus) < 1.0


def test_too_few_graphs_rejected():
  with pytest.raises(ValueError, match="at least 3"):
    synth.split_counts(2)
