"""Shared fixtures: small valid TpuGraphs files made by the simulator."""

import os
import sys

import numpy as np
import pytest

# Tests import the project's packages from the work tree.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from simulator import synth  # pylint: disable=g-import-not-at-top


def _write(kind, path, seed=0, source="xla", search="random"):
  rng = np.random.default_rng(seed)
  if kind == "tile":
    synth.write_tile_graph(str(path), rng, synth.SCALES["tiny"])
  else:
    synth.write_layout_graph(str(path), rng, synth.SCALES["tiny"], source,
                             search)
  return str(path)


@pytest.fixture
def tile_npz(tmp_path):
  """A valid tile graph."""
  return _write("tile", tmp_path / "tile.npz", seed=1)


LAYOUT_SEED = 2  # Of `layout_npz`: the same graph in every test.


@pytest.fixture
def layout_npz(tmp_path):
  """A valid layout graph."""
  return _write("layout", tmp_path / "layout.npz", seed=LAYOUT_SEED)


@pytest.fixture
def make_npz(tmp_path):
  """Writes a dict of arrays as an npz (np.savez) and returns its path."""
  counter = [0]

  def make(arrays, name=None):
    counter[0] += 1
    path = tmp_path / (name or f"g{counter[0]}.npz")
    np.savez(path, **arrays)
    return str(path)

  return make


def tiny_collection(tmp_path_factory, collection: str, graphs: int,
                    seed: int) -> str:
  """A tiny simulated collection in a fresh directory; returns its root."""
  root = str(tmp_path_factory.mktemp("data"))
  synth.synth_collection(collection, root, graphs=graphs, seed=seed,
                         scale="tiny", progress=False)
  return root


def load_dict(path):
  with np.load(path) as d:
    return {k: d[k] for k in d.files}
