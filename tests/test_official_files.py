"""Files laid out as the official TpuGraphs tools write them, end to end.

The files come from the real TPU protos in ../shared/data/real_tpu through
`tests/official_writer.py`, an independent reading of the official encoder
(not tpurank's featurizer), saved with `np.savez_compressed` and the official
dtypes: uint8 opcodes, int64 indices and runtimes, `node_splits` of shape
(1, s) closed by the node count. They must pass every command: validate,
convert, train, score and rank; tpurank's own writers must produce the same
arrays for the same proto.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from featurize import tuning
from schemas import npz_format
from schemas import tuning_proto
from simulator import synth
from tests import official_writer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REAL = os.path.join(ROOT, "..", "shared", "data", "real_tpu")
LAYOUT_PB = os.path.join(REAL, "layout_module_tuning_data.pb")
TILE_PB = os.path.join(REAL, "tile_tuning_data.pb")
LAYOUT = "layout:xla:random"
TILE = "tile:xla"

pytestmark = pytest.mark.skipif(not os.path.exists(LAYOUT_PB),
                                reason="real TPU data not present")

# The keys the official writer produces, per kind.
OFFICIAL_KEYS = {
    "layout": {"node_feat", "node_opcode", "edge_index", "node_config_ids",
               "node_config_feat", "config_runtime", "node_splits"},
    "tile": {"node_feat", "node_opcode", "edge_index", "config_feat",
             "config_runtime", "config_runtime_normalizers"},
}
OFFICIAL_DTYPES = {"node_feat": np.float32, "node_opcode": np.uint8,
                   "edge_index": np.int64, "node_config_ids": np.int64,
                   "node_config_feat": np.float32, "config_feat": np.float32,
                   "config_runtime": np.int64,
                   "config_runtime_normalizers": np.int64,
                   "node_splits": np.int64}


def _official_graphs():
  """{kind: [(name, arrays)]} of the real protos, written officially."""
  _, layout = tuning_proto.read(LAYOUT_PB)
  _, tiles = tuning_proto.read(TILE_PB)
  return {"layout": [("main", official_writer.layout_arrays(layout))],
          "tile": [(m.module.name, official_writer.tile_arrays(m))
                   for m in tiles.modules
                   if tuning.tile_skip_reason(m) is None]}


@pytest.fixture(scope="module")
def official():
  return _official_graphs()


@pytest.fixture(scope="module")
def data(tmp_path_factory, official):
  """DATA/npz/... with the real graphs: layout program in train and valid
  (and, runtimes removed, test); tile kernels 6 / 2 / 2."""
  root = str(tmp_path_factory.mktemp("official"))
  place = {LAYOUT: {"train": [0], "valid": [0], "test": [0]},
           TILE: {"train": range(6), "valid": range(6, 8),
                  "test": range(8, 10)}}
  for collection, splits in place.items():
    graphs = official[npz_format.collection_kind(collection)]
    for split, picks in splits.items():
      folder = npz_format.collection_dir(root, collection, split)
      os.makedirs(folder)
      for i in picks:
        name, arrays = graphs[i]
        if split == "test":
          arrays = official_writer.as_test_split(arrays)
        official_writer.write(os.path.join(folder, f"{name}.npz"), arrays)
  return root


def _cli(*args, timeout=900):
  proc = subprocess.run([sys.executable, "-m", "tpurank.cli", *args],
                        cwd=ROOT, capture_output=True, text=True,
                        timeout=timeout, check=False)
  return proc.returncode, proc.stdout + proc.stderr


def test_featurize_writes_what_the_official_encoder_writes(tmp_path,
                                                           official):
  for pb, kind in ((LAYOUT_PB, "layout"), (TILE_PB, "tile")):
    written = tuning.featurize(pb, str(tmp_path / kind))
    assert not written.skipped
    assert len(written.files) == len(official[kind])
    for path, (name, want) in zip(written.files, official[kind]):
      assert path.endswith(name + ".npz") or kind == "layout"
      with np.load(path) as got:
        assert set(got.files) == OFFICIAL_KEYS[kind]
        for key, value in want.items():
          assert got[key].dtype == value.dtype, (path, key)
          np.testing.assert_array_equal(got[key], value, err_msg=key)


def test_official_layout_boundaries_close_at_the_node_count(official):
  (_, arrays), = official["layout"]
  splits = arrays["node_splits"]
  assert splits.shape[0] == 1 and splits[0, 0] == 0
  assert splits[0, -1] == len(arrays["node_opcode"]) == 3163


def test_simulator_writes_the_official_key_set_and_dtypes(tmp_path):
  for collection in (TILE, LAYOUT):
    synth.synth_collection(collection, str(tmp_path), graphs=3, seed=0,
                           scale="tiny", progress=False)
    kind = npz_format.collection_kind(collection)
    for path in npz_format.find_npz([str(tmp_path / "npz" / kind)]):
      with np.load(path) as d:
        assert set(d.files) == OFFICIAL_KEYS[kind], path
        for key in d.files:
          assert d[key].dtype == OFFICIAL_DTYPES[key], (path, key)
        edges = d["edge_index"]
        # Distinct rows in (u, v) order, as the reordered adjacency.
        np.testing.assert_array_equal(edges, np.unique(edges, axis=0))
        if kind == "layout":
          assert d["node_splits"].shape[0] == 1
          assert d["node_splits"][0, -1] == len(d["node_opcode"])
      # The noiseless runtimes travel beside the file, outside `*.npz`.
      assert os.path.exists(npz_format.extra_path(
          path, synth.NOISELESS_KEY))


@pytest.mark.slow
def test_official_files_pass_every_command(tmp_path, data):
  code, text = _cli("validate", os.path.join(data, "npz"))
  assert code == 0, text
  assert "checked 13 files: 13 valid" in text

  for collection, metric in ((LAYOUT, "kendall_tau"), (TILE, "top5_error")):
    tag = collection.split(":")[0]
    records = str(tmp_path / f"records-{tag}")
    code, text = _cli("convert", "--data", data, "--collection", collection,
                      "--out", records, "--k", "8")
    assert code == 0, text
    summary = json.load(open(os.path.join(records, "conversion.json")))
    assert summary["mismatches"] == []
    for split, counts in summary["splits"].items():
      assert counts["dead_letters"] == 0, (split, counts)
      assert counts["graphs_converted"] == counts["graphs_in"] > 0

    run = str(tmp_path / f"run-{tag}")
    code, text = _cli("train", "--collection", collection, "--data", data,
                      "--out", run, "--hidden", "16", "--layers", "1",
                      "--k", "8", "--epochs", "1", "--steps-per-epoch", "1")
    assert code == 0, text
    trained = json.load(open(os.path.join(run, "summary.json")))
    assert np.isfinite(trained["valid_metrics"][metric])

    model = os.path.join(run, "export")
    csv = str(tmp_path / f"{tag}.csv")
    code, text = _cli("score", "--model", model, "--data", data,
                      "--collection", collection, "--split", "test",
                      "--out", csv)
    assert code == 0, text
    rows = open(csv).read().strip().splitlines()[1:]
    assert len(rows) == (1 if tag == "layout" else 2)

    graph = sorted(npz_format.find_npz([npz_format.collection_dir(
        data, collection, "valid")]))[0]
    code, text = _cli("rank", "--graph", graph, "--model", model,
                      "--collection", collection, "--top", "3")
    assert code == 0, text
    assert "best measured" in text
