"""Tests for the model: padding invariance, XLA train step, every GNN."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_gnn as tfgnn
import tensorflow_ranking as tfr

from tests.trainer.helpers import make_records, unit_stats
from trainer import graph_ops
from trainer import hparams
from trainer import input_fn
from trainer import model as model_lib


def _inputs(tmp_path, kind, n=3, join=hparams.JOINS[0]):
  # Valid records: examples of K configs, read as they are.
  path, _ = make_records(tmp_path, kind, graphs=2, k=5, split="valid")
  return path, input_fn.model_input(
      kind, next(iter(input_fn.read_records([path]).batch(n))), join)


KINDS = [("tile", "late"), ("layout", "late"), ("layout", "early")]


@pytest.mark.parametrize("kind,join", KINDS)
def test_padding_does_not_change_real_scores(tmp_path, kind, join):
  path, graph = _inputs(tmp_path, kind, join=join)
  constraints = input_fn.size_constraints_for([path], kind, 3, 5, join)
  padded, mask = tfgnn.pad_to_total_sizes(graph, constraints)
  assert int(padded.num_components) > int(graph.num_components)
  sm = model_lib.build_score_model(hparams.ModelConfig(kind=kind, join=join),
                                   padded.spec.relax(num_components=True,
                                                     num_nodes=True,
                                                     num_edges=True),
                                   unit_stats())
  plain = sm(graph)
  pad = sm(padded)
  n = int(tf.size(plain["scores"]))
  np.testing.assert_allclose(pad["scores"].numpy()[:n], plain["scores"],
                             rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(pad["slot"].numpy()[:n], plain["slot"])
  assert np.all(pad["slot"].numpy()[n:] == 0)  # Padding is marked.
  del mask


@pytest.mark.parametrize("kind,join", KINDS)
def test_padded_train_step_compiles_with_xla(tmp_path, kind, join):
  path, _ = make_records(tmp_path, kind, graphs=2, k=5)
  constraints = input_fn.size_constraints_for([path], kind, 2, 5, join)
  ds = input_fn.train_dataset([path], kind, 2, 5,
                              size_constraints=constraints, seed=0,
                              join=join)
  graph, labels = next(iter(ds))
  sm = model_lib.build_score_model(hparams.ModelConfig(kind=kind, join=join),
                                   graph.spec, unit_stats())
  ranker = model_lib.RankingModel(sm, 2, 5)
  ranker.compile(optimizer="adam", loss=tfr.keras.losses.ListMLELoss(),
                 jit_compile=True)
  before = [w.numpy().copy() for w in ranker.trainable_weights]
  history = ranker.fit(ds, steps_per_epoch=3, epochs=1, verbose=0)
  assert np.isfinite(history.history["loss"][0])
  after = [w.numpy() for w in ranker.trainable_weights]
  assert any(not np.allclose(a, b) for a, b in zip(before, after))
  assert ranker.jit_compile and labels.shape == (2, 5)
  # The XLA-compiled forward pass agrees with the eager one.
  xla = tf.function(lambda g: ranker(g), jit_compile=True)
  np.testing.assert_allclose(xla(graph), ranker(graph), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("gnn,config_only", [("sage", False),
                                             ("gatv2", False),
                                             ("mtalbis", False),
                                             ("none", True)])
@pytest.mark.parametrize("kind", ["tile", "layout"])
def test_every_gnn_scores_every_config(tmp_path, kind, gnn, config_only):
  _, graph = _inputs(tmp_path, kind)
  cfg = hparams.ModelConfig(kind=kind, gnn=gnn, config_only=config_only,
                              hidden=16, layers=2)
  out = model_lib.build_score_model(cfg, graph.spec, unit_stats())(graph)
  configs = (graph.node_sets["config"].total_size if kind == "tile"
             else graph.num_components)
  assert out["scores"].shape == (int(configs),)
  assert np.all(np.isfinite(out["scores"].numpy()))


@pytest.mark.parametrize("join", hparams.JOINS)
@pytest.mark.parametrize("config_only", [False, True])
def test_layout_score_reads_its_own_config_alone(tmp_path, config_only,
                                                 join):
  # Changing config 1's values moves config 1's score and no other,
  # although every config shares the graph's encoding (and, late join,
  # the rows of the configs it agreed with).
  path, _ = make_records(tmp_path, "layout", graphs=2, k=5, split="valid")
  merged = input_fn.parse_batch(
      "layout", next(iter(input_fn.read_records([path]).batch(3))))
  feat = merged.node_sets["node_config"]["feat"].numpy()
  rows = merged.edge_sets["part_of"].adjacency.target.numpy() == 1
  feat[rows] = np.where(feat[rows] == 0, 1.0, 0.0)
  other = merged.replace_features(node_sets={"node_config": {
      "feat": tf.constant(feat)}})
  graph, changed = (graph_ops.expand("layout", g, join)
                    for g in (merged, other))
  sm = model_lib.build_score_model(
      hparams.ModelConfig(kind="layout", config_only=config_only,
                          gnn="none" if config_only else "sage", join=join),
      graph.spec.relax(num_components=True, num_nodes=True, num_edges=True),
      unit_stats())
  moved = ~np.isclose(sm(graph)["scores"].numpy(),
                      sm(changed)["scores"].numpy(), rtol=1e-6, atol=1e-7)
  np.testing.assert_array_equal(np.flatnonzero(moved), [1])


def test_config_only_ignores_the_graph(tmp_path):
  # Same configs on a different graph: the baseline gives the same scores,
  # the GNN does not.
  _, graph = _inputs(tmp_path, "tile", n=1)
  other = graph.replace_features(node_sets={"op": {
      "feat": graph.node_sets["op"]["feat"] * 2.0 + 1.0,
      "opcode": graph.node_sets["op"]["opcode"]}})
  for config_only, same in ((True, True), (False, False)):
    cfg = hparams.ModelConfig(kind="tile", config_only=config_only,
                                gnn="none" if config_only else "sage")
    sm = model_lib.build_score_model(cfg, graph.spec, unit_stats())
    a, b = sm(graph)["scores"].numpy(), sm(other)["scores"].numpy()
    assert np.allclose(a, b) == same


@pytest.mark.parametrize("join", hparams.JOINS)
def test_only_the_gnn_reads_the_cost_scales(tmp_path, join):
  # Where copies run is a fact of the graph: the baseline must not see it.
  _, graph = _inputs(tmp_path, "layout", join=join)
  name = "op" if join == "early" else "config_op"
  features = dict(graph.node_sets[name].features)
  features["cost_scale"] = features["cost_scale"] * 3.0 + 1.0
  other = graph.replace_features(node_sets={name: features})
  for config_only, same in ((True, True), (False, False)):
    cfg = hparams.ModelConfig(kind="layout", config_only=config_only,
                              gnn="none" if config_only else "sage",
                              join=join)
    sm = model_lib.build_score_model(cfg, graph.spec, unit_stats())
    for w in sm.weights:  # The rates start at zero: make them count.
      if "cost_rates" in w.name:
        w.assign(tf.random.stateless_normal(w.shape, [0, 1]))
    a, b = sm(graph)["scores"].numpy(), sm(other)["scores"].numpy()
    assert np.allclose(a, b) == same


@pytest.mark.parametrize("join", hparams.JOINS)
def test_features_far_outside_the_train_range_are_clipped(tmp_path, join):
  _, graph = _inputs(tmp_path, "layout", join=join)
  stats = unit_stats()
  # A feature nearly constant in "training" (std 0.03), huge at inference.
  stats.node_var[29] = 1e-3
  sm = model_lib.build_score_model(
      hparams.ModelConfig(kind="layout", join=join),
      graph.spec.relax(num_components=True, num_nodes=True, num_edges=True),
      stats)
  name = "source_op" if join == "early" else "op"

  def scores_with(value):
    feat = graph.node_sets[name]["feat"].numpy()
    feat[:, 29] = value
    features = dict(graph.node_sets[name].features)
    features["feat"] = tf.constant(feat)
    return sm(graph.replace_features(node_sets={name: features}))[
        "scores"].numpy()

  far, farther = scores_with(1e6), scores_with(1e12)
  assert np.isfinite(far).all() and len(np.unique(far)) > 1
  # Past the clip, how far out a feature is no longer moves the scores.
  np.testing.assert_allclose(far, farther, rtol=1e-6)
  assert not np.allclose(far, scores_with(0.0))


def test_every_loss_and_gnn_name_has_an_implementation():
  from trainer import train as train_lib  # pylint: disable=g-import-not-at-top
  assert tuple(train_lib.LOSSES) == hparams.LOSSES
  for gnn in hparams.GNNS:
    if gnn != "none":
      model_lib._gnn_layer(  # pylint: disable=protected-access
          hparams.ModelConfig(kind="layout", gnn=gnn), 0)
