"""The exported SavedModel: TF Serving layout, plain-TF loading, same order."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from conversion import examples
from conversion import prune
from serving import model_repository
from tests.trainer.helpers import make_records, unit_stats
from trainer import call_cost
from trainer import export
from trainer import hparams
from trainer import input_fn
from trainer import model as model_lib

_LOAD = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    serialized = [open(p, "rb").read() for p in sys.argv[2:]]
    fn = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
    out = fn(examples=tf.constant(serialized))
    print(json.dumps({"gnn_loaded": "tensorflow_gnn" in sys.modules,
                      "scores": out["scores"].numpy().tolist(),
                      "index": out["config_index"].numpy().tolist()}))
""")


def test_export_loads_without_tfgnn_and_ranks_like_the_model(tmp_path):
  for kind in ("tile", "layout"):
    path, _ = make_records(tmp_path, kind, graphs=2, k=5, split="valid")
    serialized = [s.numpy() for s in input_fn.read_records([path]).take(3)]
    graph = input_fn.model_input(kind, np.array(serialized, dtype=object))
    sm = model_lib.build_score_model(hparams.ModelConfig(kind=kind),
                                     graph.spec.relax(num_components=True,
                                                      num_nodes=True,
                                                      num_edges=True),
                                     unit_stats())
    base = str(tmp_path / f"models-{kind}")
    v1, v2 = [export.save(sm, kind, os.path.join(base, str(
        model_repository.next_version(base))), {"collection": "test"})
              for _ in range(2)]
    assert [os.path.basename(v) for v in (v1, v2)] == ["1", "2"]
    assert os.path.exists(os.path.join(v1, "saved_model.pb"))
    assert export.read_metadata(v2)["version"] == 2
    files = []
    for i, s in enumerate(serialized):
      files.append(str(tmp_path / f"{kind}-ex{i}.bin"))
      open(files[-1], "wb").write(s)
    r = subprocess.run([sys.executable, "-c", _LOAD, v2, *files],
                       capture_output=True, text=True, check=True)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["gnn_loaded"] is False
    scores = np.array(out["scores"])
    index = np.array(out["index"])
    inproc = sm(graph)
    flat = inproc["scores"].numpy()
    start = 0
    for row in range(len(serialized)):
      n = int((index[row] >= 0).sum())
      want = flat[start:start + n]
      # Lower served score = faster = higher in-process relevance.
      np.testing.assert_allclose(scores[row, :n], -want, rtol=1e-5,
                                 atol=1e-6)
      assert np.array_equal(np.argsort(scores[row, :n]), np.argsort(-want))
      start += n


_RANK = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    arrays = dict(np.load(sys.argv[2]))
    fn = tf.saved_model.load(sys.argv[1]).signatures["rank"]
    out = fn(**{k: tf.constant(v) for k, v in arrays.items()})
    print(json.dumps({"gnn_loaded": "tensorflow_gnn" in sys.modules,
                      "scores": out["scores"].numpy().tolist()}))
""")


def _arrays(graph):
  """The plain-tensor request of a (pruned) graph with all its configs."""
  arrays = {"node_feat": graph.node_feat.astype(np.float32),
            "node_opcode": graph.node_opcode.astype(np.int64),
            "edge_index": graph.edge_index.astype(np.int64)}
  feat = graph.take_config_feat(np.arange(graph.num_configs))
  if graph.kind == "tile":
    arrays["config_feat"] = np.asarray(feat, np.float32)
  else:
    arrays["node_config_ids"] = graph.node_config_ids.astype(np.int64)
    arrays["node_config_feat"] = np.asarray(feat, np.float32)
  return arrays


@pytest.mark.parametrize("kind,join", [("tile", "late"), ("layout", "late"),
                                       ("layout", "early")])
def test_rank_signature_takes_npz_arrays_and_scores_like_examples(
    tmp_path, monkeypatch, kind, join):
  # A small budget: the signature must split the configs into chunks.
  monkeypatch.setattr(call_cost, "OP_COPY_BUDGET", 300)
  _, graphs = make_records(tmp_path, kind, graphs=1, k=5, split="valid")
  graph = prune.prune(graphs[0], 1)
  serialized = list(examples.graph_examples(graph, "x:g", graph.num_configs,
                                            "valid", hops=-1))
  model_graph = input_fn.model_input(kind, np.array(serialized, dtype=object),
                                     join)
  sm = model_lib.build_score_model(
      hparams.ModelConfig(kind=kind, join=join),
      model_graph.spec.relax(num_components=True, num_nodes=True,
                             num_edges=True), unit_stats())
  path = export.save(sm, kind, str(tmp_path / "m" / "1"), {}, join)
  # The whole graph, as a TF Serving user sends it: the model prunes it.
  np.savez(tmp_path / "req.npz", **_arrays(graphs[0]))
  r = subprocess.run([sys.executable, "-c", _RANK, path,
                      str(tmp_path / "req.npz")],
                     capture_output=True, text=True, check=True)
  out = json.loads(r.stdout.strip().splitlines()[-1])
  assert out["gnn_loaded"] is False
  want = -sm(model_graph)["scores"].numpy()
  assert len(want) == graph.num_configs > 3
  if kind == "layout":  # Several chunks were run.
    assert call_cost.configs_per_example(
        graph.num_nodes, len(graph.node_config_ids), join,
        budget=300) < graph.num_configs
  np.testing.assert_allclose(out["scores"], want, rtol=1e-4, atol=1e-5)
  # A graph pruned before sending scores the same (pruning is idempotent).
  rank = tf.saved_model.load(path).signatures["rank"]
  pruned = rank(**{k: tf.constant(v) for k, v in _arrays(graph).items()})
  np.testing.assert_allclose(pruned["scores"].numpy(), want, rtol=1e-4,
                             atol=1e-5)


def test_rank_signature_refuses_non_finite_features(tmp_path):
  _, graphs = make_records(tmp_path, "layout", graphs=1, k=5, split="valid")
  graph = prune.prune(graphs[0], 1)
  serialized = list(examples.graph_examples(graph, "x:g", 4, "valid", -1))
  model_graph = input_fn.model_input("layout",
                                     np.array(serialized[:1], dtype=object))
  sm = model_lib.build_score_model(
      hparams.ModelConfig(kind="layout"),
      model_graph.spec.relax(num_components=True, num_nodes=True,
                             num_edges=True), unit_stats())
  path = export.save(sm, "layout", str(tmp_path / "m" / "1"), {})
  rank = tf.saved_model.load(path).signatures["rank"]
  for key, value in (("node_feat", np.nan), ("node_config_feat", np.nan),
                     ("node_config_feat", np.inf)):
    arrays = _arrays(graph)
    arrays[key] = arrays[key].astype(np.float32)
    arrays[key].reshape(-1)[3] = value
    with pytest.raises(tf.errors.InvalidArgumentError, match=key):
      rank(**{k: tf.constant(v) for k, v in arrays.items()})
