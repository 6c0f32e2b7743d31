"""Featurizing the real TPU tuning protos in ../shared/data/real_tpu/.

Expected values below were read off the protos by hand (instruction fields,
run configs and profiles) and placed at the feature indices of the official
TpuGraphs README.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

from featurize import hlo_graph
from featurize import tuning
from schemas import features as F
from schemas import npz_format
from schemas import tuning_proto

REAL = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared",
                    "data", "real_tpu")
LAYOUT_PB = os.path.join(REAL, "layout_module_tuning_data.pb")
TILE_PB = os.path.join(REAL, "tile_tuning_data.pb")

pytestmark = pytest.mark.skipif(not os.path.exists(LAYOUT_PB),
                                reason="real TPU data not present")


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
  out = str(tmp_path_factory.mktemp("layout"))
  (path,) = tuning.featurize(LAYOUT_PB, out).files
  return npz_format.load_graph(path, "layout"), path


@pytest.fixture(scope="module")
def tiles(tmp_path_factory):
  out = str(tmp_path_factory.mktemp("tile"))
  return {os.path.basename(p): npz_format.load_graph(p, "tile")
          for p in tuning.featurize(TILE_PB, out).files}


def test_kinds_are_told_apart():
  assert tuning_proto.read(LAYOUT_PB)[0] == "layout"
  assert tuning_proto.read(TILE_PB)[0] == "tile"


def test_layout_graph_counts(layout):
  g, path = layout
  assert npz_format.validate_file(path, "layout") == []
  assert g.num_nodes == 3163  # All instructions of all 143 computations.
  assert len(g.node_config_ids) == 62
  assert g.num_configs == 122 - 10  # 10 runs failed.
  _, msg = tuning_proto.read(LAYOUT_PB)
  operand_edges = sum(len(set(i.operand_ids)) for c in msg.module.computations
                      for i in c.instructions)
  call_edges = sum(len(i.called_computation_ids)
                   for c in msg.module.computations for i in c.instructions)
  assert len(g.edge_index) == operand_edges + call_edges
  # Topological: every consumer comes after what it consumes.
  assert (g.edge_index[:, 0] > g.edge_index[:, 1]).all()


def test_layout_convolution_features_by_hand(layout):
  g, _ = layout
  # config_index_to_node[4] = node 660 = main__.10904/convolution.1043:
  # bf16[2,96,96,96,32]{4,3,2,1,0}, 3x3x3 window, stride 1, padding 1.
  assert g.node_config_ids[4] == 660
  v = g.node_feat[660]
  assert g.node_opcode[660] == 26  # "convolution" in the TpuGraphs ids.
  assert v[F.ELEMENT_TYPE + F.ELEMENT_TYPES.index("bf16")] == 1
  assert v[F.ELEMENT_TYPE:F.ELEMENT_TYPE + 19].sum() == 1
  np.testing.assert_array_equal(v[F.SHAPE_DIMS:F.SHAPE_DIMS + 8],
                                [2, 96, 96, 96, 32, 0, 322, 56623104])
  np.testing.assert_array_equal(v[F.WINDOW_SIZE:F.WINDOW_SIZE + 8],
                                [3, 3, 3, 0, 0, 0, 9, 27])
  np.testing.assert_array_equal(
      v[F.WINDOW_PADDING_LOW:F.WINDOW_PADDING_LOW + 8],
      [1, 1, 1, 0, 0, 0, 3, 1])
  assert v[F.CONV_INPUT_FEATURE_DIM] == 4
  np.testing.assert_array_equal(
      v[F.CONV_INPUT_SPATIAL_DIMS:F.CONV_INPUT_SPATIAL_DIMS + 4], [1, 2, 3, 0])
  assert v[F.CONV_KERNEL_INPUT_FEATURE_DIM] == 3
  assert v[F.CONV_KERNEL_OUTPUT_FEATURE_DIM] == 4
  assert v[F.FEATURE_GROUP_COUNT] == 1 and v[F.BATCH_GROUP_COUNT] == 1
  np.testing.assert_array_equal(
      v[F.LAYOUT_MINOR_TO_MAJOR:F.LAYOUT_MINOR_TO_MAJOR + 6],
      [4, 3, 2, 1, 0, 0])
  assert v[F.IS_ROOT] == 0


def test_layout_configs_and_runtimes_by_hand(layout):
  g, _ = layout
  # Run 0 is the default, at 910903932 ns: node 0 has two empty tensors
  # (all -1), node 4 {4,0}, {4,0}, {4,3}, node 61 {2,1,0}, {3,2,1,0}.
  feats = g.take_config_feat(np.array([0, 1]))
  assert (feats[0, 0] == -1).all()
  np.testing.assert_array_equal(
      feats[0, 4], [4, 0, -1, -1, -1, -1, 4, 0, -1, -1, -1, -1,
                    4, 3, -1, -1, -1, -1])
  np.testing.assert_array_equal(
      feats[0, 61], [2, 1, 0, -1, -1, -1, 3, 2, 1, 0, -1, -1] + [-1] * 6)
  assert g.config_runtime[0] == 910903932
  # Run 1 measured the very same config again: 910924300 ns. The real data
  # repeats configs (112 runs, 91 distinct); conversion merges them.
  np.testing.assert_array_equal(feats[0], feats[1])
  assert g.config_runtime[1] == 910924300


def test_tile_kernels_by_hand(tiles):
  assert len(tiles) == 10
  g = tiles["tile_tuning_data__fusion.191.npz"]
  assert g.num_configs == 581 - 2  # Runs 575 and 579 failed.
  # The default run (run 0): kernel bounds [3,1,24,3], output [12,4,4,3].
  np.testing.assert_array_equal(
      g.config_feat[0], [3, 1, 24, 3, 0, 0, 31, 216,
                         12, 4, 4, 3, 0, 0, 23, 576,
                         0, 0, 0, 0, 0, 0, 0, 0])
  assert g.config_runtime[0] == 151565 and g.config_runtime[1] == 2040285
  assert (g.config_runtime_normalizers == 151565).all()
  # The entry computation's root (the last node) is the fusion, whose
  # shape is a tuple (element type 13 = TUPLE in the proto).
  root = g.node_feat[-1]
  assert root[F.IS_ROOT] == 1
  assert root[F.ELEMENT_TYPE + F.ELEMENT_TYPES.index("tuple")] == 1


def test_featurize_command_and_bad_input(tmp_path):
  out = str(tmp_path / "out")
  cmd = [sys.executable, "-m", "tpurank.cli"]
  proc = subprocess.run(cmd + ["featurize", TILE_PB, "--out", out],
                        capture_output=True, text=True, check=False)
  assert proc.returncode == 0, proc.stderr
  assert len(os.listdir(out)) == 10
  proc = subprocess.run(cmd + ["validate", out], capture_output=True,
                        text=True, check=False)
  assert proc.returncode == 0, proc.stdout + proc.stderr
  bad = tmp_path / "bad.pb"
  bad.write_bytes(b"\xff\xff\xff")
  proc = subprocess.run(cmd + ["featurize", str(bad), "--out", out],
                        capture_output=True, text=True, check=False)
  assert proc.returncode == 2
  assert "bad.pb: file:" in proc.stderr and "Traceback" not in proc.stderr


def test_node_splits_are_the_official_encoders_boundaries(layout):
  g, _ = layout
  _, msg = tuning_proto.read(LAYOUT_PB)
  graph = hlo_graph.from_module(msg.module)
  raw = np.load(g.path)["node_splits"]
  assert raw.dtype == np.int64 and raw.shape == (1, len(graph.node_splits))
  np.testing.assert_array_equal(raw[0], graph.node_splits)
  # hlo_encoder.cc: 0, the running count after every computation named
  # *cluster* / *while* / *cond*, and the instruction count to close.
  counts = np.cumsum([len(c.instructions) for c in msg.module.computations])
  marked = [any(m in c.name for m in ("cluster", "while", "cond"))
            for c in msg.module.computations]
  want = [0] + [int(k) for k, m in zip(counts, marked) if m]
  if want[-1] < counts[-1]:
    want.append(int(counts[-1]))
  np.testing.assert_array_equal(graph.node_splits, want)
  assert graph.node_splits[-1] == graph.num_nodes == g.num_nodes
