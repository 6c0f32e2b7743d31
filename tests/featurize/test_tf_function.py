"""Tests for featurizing your own TensorFlow function (`tpurank hlo`)."""

import numpy as np
import pytest

from featurize import tf_function
from schemas import features as F
from schemas import npz_format
from schemas.errors import InputError
from tests.serving.conftest import build_model
from tpurank import cli
from trainer import export

MODULE = '''
import tensorflow as tf

def fn(x, w):
  return tf.nn.relu(tf.reshape(tf.matmul(x, w), [-1, 32]) + 1.0)

model = tf.keras.Sequential([
    tf.keras.layers.Dense(64, activation="relu"),
    tf.keras.layers.Reshape((8, 8)),
    tf.keras.layers.Conv1D(4, 3),
])
model.build((None, 32))

def keras_model(x):
  return model(x)
'''


@pytest.fixture
def module_file(tmp_path):
  path = tmp_path / "my_model.py"
  path.write_text(MODULE)
  return str(path)


def test_parse_shapes():
  shapes = tf_function.parse_shapes("64x128, bf16:128x256")
  assert [(s.dtype, s.dims) for s in shapes] == [("f32", [64, 128]),
                                                 ("bf16", [128, 256])]
  with pytest.raises(InputError, match="dtype"):
    tf_function.parse_shapes("f99:3x3")
  with pytest.raises(InputError, match="dims like"):
    tf_function.parse_shapes("3by3")


def test_graph_and_candidate_layouts(module_file, tmp_path):
  fn = tf_function.load_function(module_file + ":fn")
  shapes = tf_function.parse_shapes("bf16:8x16,bf16:16x64")
  module = tf_function.compile_hlo(fn, shapes)
  insts = [i for c in module.computations for i in c.instructions]
  out = tf_function.write_graph(fn, shapes, str(tmp_path / "g.npz"),
                                num_configs=50)
  g = npz_format.load_graph(out)
  assert g.num_nodes == len(insts)
  assert not g.has_runtimes
  configurable = [insts[i].opcode for i in g.node_config_ids]
  assert "dot" in configurable and set(configurable) <= {
      "dot", "reshape", "convolution"}
  # The parameters keep their dtype and shape.
  params = [i for i, x in enumerate(insts) if x.opcode == "parameter"]
  assert all(g.node_feat[p, F.ELEMENT_TYPE + F.ELEMENT_TYPES.index("bf16")]
             == 1 for p in params)
  feats = g.take_config_feat(np.arange(g.num_configs))
  assert g.num_configs == 50
  assert (feats[0] == -1).all()  # Config 0: all compiler default.
  assert len({f.tobytes() for f in feats}) == 50
  for j, node in enumerate(g.node_config_ids):
    rank = len(insts[node].shape.dimensions)
    for row in feats[:, j, :6]:  # The output tensor's choice.
      chosen = row[row >= 0]
      assert len(chosen) in (0, rank)
      if len(chosen):
        assert sorted(chosen) == list(range(rank))


def test_hlo_command_then_rank(module_file, tmp_path, layout_npz, capsys):
  out = str(tmp_path / "graph.npz")
  assert cli.main(["hlo", "--module", module_file + ":keras_model",
                   "--input-shapes", "4x32", "--out", out, "--configs",
                   "20"]) == 0
  model = export.save(build_model(layout_npz), "layout",
                      str(tmp_path / "m" / "1"), {})
  capsys.readouterr()
  assert cli.main(["rank", "--graph", out, "--model", model, "--top",
                   "3"]) == 0
  rows = [l.split() for l in capsys.readouterr().out.splitlines()
          if l.strip()[:1].isdigit()]
  assert [r[0] for r in rows] == ["1", "2", "3"]
  assert all(0 <= int(r[1]) < 20 for r in rows)


def test_hlo_command_bad_input(module_file, tmp_path, capsys):
  assert cli.main(["hlo", "--module", module_file + ":nope",
                   "--input-shapes", "4x32", "--out",
                   str(tmp_path / "x.npz")]) == 2
  assert "nope: expected a function" in capsys.readouterr().err
  assert cli.main(["hlo", "--module", module_file + ":fn",
                   "--input-shapes", "4x32", "--out",
                   str(tmp_path / "x.npz")]) == 2
  assert "one per argument" in capsys.readouterr().err
