"""Tests for scoring whole graphs with an exported model, and `tpurank rank`."""

import numpy as np
import pytest

from conversion import examples
from conversion import options
from schemas import npz_format
from schemas.errors import InputError
from serving.saved_model_scorer import SavedModelScorer
from tests.trainer.helpers import unit_stats
from tpurank import cli
from trainer import export
from trainer import hparams
from trainer import input_fn
from trainer import model as model_lib


@pytest.fixture
def exported(tmp_path, layout_npz):
  g = npz_format.load_graph(layout_npz)
  ex = list(examples.graph_examples(g, "layout:x:g", 4, "valid", hops=2))
  graph = input_fn.model_input("layout", np.array(ex[:2], dtype=object))
  sm = model_lib.build_score_model(
      hparams.ModelConfig(kind="layout", hidden=16, layers=1),
      graph.spec.relax(num_components=True, num_nodes=True, num_edges=True),
      unit_stats())
  # Trained on 2-hop pruning (not the default): scoring must prune alike.
  return sm, export.save(sm, "layout",
                         str(tmp_path / "m" / "1"), {"hops": 2}), g


def test_every_config_scored_in_chunks_like_the_model(exported):
  sm, path, g = exported
  scorer = SavedModelScorer(path, k=5, batch=3)
  scores = scorer.score_graph(g, "layout:x:g")
  assert scores.shape == (g.num_configs,) and not np.isnan(scores).any()
  ex = list(examples.graph_examples(g, "layout:x:g", g.num_configs, "valid",
                                    hops=2))
  direct = sm(input_fn.model_input("layout", np.array(ex, dtype=object)))
  np.testing.assert_allclose(scores, -direct["scores"].numpy(), rtol=1e-4,
                             atol=1e-5)


def test_pruning_follows_the_model_metadata(exported, tmp_path):
  sm, path, g = exported
  assert SavedModelScorer(path).hops == 2
  bare = export.save(sm, "layout",
                     str(tmp_path / "bare" / "1"), {})
  assert SavedModelScorer(bare).hops == options.DEFAULT_HOPS
  unset = export.save(sm, "layout",
                      str(tmp_path / "unset" / "1"), {"hops": None})
  assert SavedModelScorer(unset).hops == options.DEFAULT_HOPS
  # Pruning changes what the model sees, so the hops matter to the scores.
  scorer = SavedModelScorer(path, k=8)
  assert not np.allclose(scorer.score_graph(g, "layout:x:g"),
                         scorer.score_graph(g, "layout:x:g", hops=0))


def test_rank_command_prints_the_best_configs(exported, layout_npz, capsys):
  _, path, g = exported
  base = path.rsplit("/", 1)[0]  # The newest version is picked.
  assert cli.main(["rank", "--graph", layout_npz, "--model", base,
                   "--top", "3"]) == 0
  out = capsys.readouterr().out.splitlines()
  rows = [l.split() for l in out if l.strip()[:1].isdigit()]
  assert [int(r[0]) for r in rows] == [1, 2, 3]
  scores = SavedModelScorer(path).score_graph(g, "x")
  assert [int(r[1]) for r in rows] == list(np.argsort(scores,
                                                      kind="stable")[:3])


def test_rank_bad_model_dir(tmp_path, layout_npz, capsys):
  assert cli.main(["rank", "--graph", layout_npz, "--model",
                   str(tmp_path)]) == 2
  assert "model: expected a SavedModel" in capsys.readouterr().err


def test_a_graph_of_the_other_kind_is_refused(exported, tile_npz, capsys):
  _, path, _ = exported
  tile = npz_format.load_graph(tile_npz)
  with pytest.raises(InputError, match="kind: expected a layout graph"):
    SavedModelScorer(path).score_graph(tile, "tile:xla:g")
  assert cli.main(["rank", "--graph", tile_npz, "--model", path]) == 2
  assert "found a tile graph" in capsys.readouterr().err


def test_rank_keeps_the_tile_default_unless_confident(tile_npz, tmp_path,
                                                      capsys):
  # pylint: disable=g-import-not-at-top
  from tests.serving.conftest import build_model
  from trainer import default_guard
  sm = build_model(tile_npz, kind="tile")
  g = npz_format.load_graph(tile_npz)
  scores = SavedModelScorer(export.save(sm, "tile", str(
      tmp_path / "probe" / "1"), {})).score_graph(g, "x")
  leads = scores[0] - scores[1:]
  margin = float(np.median(leads[leads > 0])) if np.any(leads > 0) else 0.0

  def ranked(metadata, *flags):
    path = export.save(sm, "tile", str(tmp_path / str(len(
        list(tmp_path.iterdir()))) / "1"), metadata)
    assert cli.main(["rank", "--graph", tile_npz, "--model", path,
                     "--top", str(g.num_configs), *flags]) == 0
    out = capsys.readouterr().out.splitlines()
    return out, [int(l.split()[1]) for l in out if l.strip()[:1].isdigit()]

  out, order = ranked({default_guard.METADATA_KEY: {"margin": None}})
  assert order[0] == 0 and "default first" in "\n".join(out)
  assert order[1:] == [i for i in np.argsort(scores, kind="stable")
                       if i != 0]
  _, order = ranked({default_guard.METADATA_KEY: {"margin": margin}})
  assert order == default_guard.guarded_order(scores, margin, 0).tolist()
  _, order = ranked({default_guard.METADATA_KEY: {"margin": None}},
                    "--no-default-guard")
  assert order == np.argsort(scores, kind="stable").tolist()
  # A model without a calibration (not trained by tpurank) is not guarded.
  _, order = ranked({})
  assert order == np.argsort(scores, kind="stable").tolist()
  guarded = export.save(sm, "tile", str(tmp_path / "guarded" / "1"),
                        {default_guard.METADATA_KEY: {"margin": None}})
  assert cli.main(["rank", "--graph", tile_npz, "--model", guarded,
                   "--default-config", str(g.num_configs)]) == 2
  err = capsys.readouterr().err
  assert "--default-config" in err and len(err.strip().splitlines()) == 1


def test_rank_refuses_a_bad_config_value_in_one_line(exported, layout_npz,
                                                     make_npz, capsys):
  # pylint: disable=g-import-not-at-top
  from tests.conftest import load_dict
  _, path, _ = exported
  d = load_dict(layout_npz)
  feat = d["node_config_feat"].copy()
  feat[-1, 0, 0] = 9.0
  bad = make_npz(dict(d, node_config_feat=feat))
  assert cli.main(["rank", "--graph", bad, "--model", path]) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and bad in err[0] and "node_config_feat" in err[0]
  assert f"in config {len(feat) - 1}" in err[0]
