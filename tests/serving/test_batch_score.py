"""Tests for batch scoring with Beam RunInference into a Kaggle CSV."""

import csv
import json
import os

import numpy as np
import pytest

from schemas import npz_format
from serving import batch_score
from serving import saved_model_scorer
from serving import score_job
from simulator import synth
from tests.serving.conftest import build_model
from trainer import default_guard
from trainer import export

IN_MEMORY = ["--runner=DirectRunner", "--direct_running_mode=in_memory"]
LAYOUT = "layout:nlp:default"


@pytest.fixture
def data(tmp_path):
  """Tiny layout and tile collections; one corrupt layout test file."""
  root = str(tmp_path / "data")
  synth.synth_collection(LAYOUT, root, graphs=8, seed=1, scale="tiny",
                         progress=False)
  synth.synth_collection("tile:xla", root, graphs=4, seed=1, scale="tiny",
                         progress=False)
  with open(os.path.join(npz_format.collection_dir(root, LAYOUT, "test"),
                         "broken.npz"), "wb") as f:
    f.write(b"PK\x03\x04 truncated")
  return root


def _rows(path):
  with open(path) as f:
    reader = csv.reader(f)
    assert next(reader) == ["ID", "TopConfigs"]
    return {r[0]: [int(x) for x in r[1].split(";")] for r in reader}


def test_submission_ranks_every_config_and_counts_reconcile(data, repository,
                                                            tmp_path):
  _, model = repository
  out = str(tmp_path / "submission.csv")
  summary = score_job.run([model], data, out, beam_args=IN_MEMORY)
  test = score_job.find_collections(data, "test")
  graphs = sum(len(f) for f in test.values())
  rows = _rows(out)
  assert summary["graphs"] == graphs
  assert summary["rows"] == len(rows) == graphs - summary["dead_letters"]
  assert summary["reconciled"]
  with open(out + ".dead_letters.jsonl") as f:
    dead = [json.loads(line) for line in f]
  # The broken file, and every tile graph (no tile model was given).
  assert {os.path.basename(d["file"]) for d in dead} == {"broken.npz"} | {
      os.path.basename(p) for p in test["tile:xla"]}
  assert any(d["field"] == "--model" for d in dead)
  scorer = saved_model_scorer.SavedModelScorer(model)
  for path in test[LAYOUT]:
    if path.endswith("broken.npz"):
      continue
    gid = npz_format.graph_id(LAYOUT, path)
    g = npz_format.load_graph(path)
    assert sorted(rows[gid]) == list(range(g.num_configs))
    want = np.argsort(scorer.score_graph(g, gid), kind="stable")
    np.testing.assert_array_equal(rows[gid], want)


def test_metrics_where_runtimes_exist(data, repository, tmp_path):
  _, model = repository
  out = str(tmp_path / "valid.csv")
  summary = score_job.run([model], data, out, collection=LAYOUT,
                          split="valid", beam_args=IN_MEMORY)
  valid = score_job.find_collections(data, "valid")[LAYOUT]
  assert summary["rows"] == len(valid) and summary["dead_letters"] == 0
  with open(out + ".metrics.jsonl") as f:
    per_graph = [json.loads(line) for line in f]
  assert len(per_graph) == len(valid)
  assert all(-1 <= m["kendall_tau"] <= 1 for m in per_graph)
  assert summary["metrics"][LAYOUT]["graphs"] == len(valid)


def test_tile_rows_hold_the_five_best_configs(data, tile_npz, tmp_path):
  model = export.save(build_model(tile_npz, kind="tile"), "tile",
                      str(tmp_path / "tile_model" / "1"), {})
  out = str(tmp_path / "tile.csv")
  summary = score_job.run([model], data, out, collection="tile:xla",
                          beam_args=IN_MEMORY)
  rows = _rows(out)
  files = score_job.find_collections(data, "test")["tile:xla"]
  assert summary["rows"] == len(rows) == len(files)
  scorer = saved_model_scorer.SavedModelScorer(model)
  for path in files:
    gid = npz_format.graph_id("tile:xla", path)
    want = np.argsort(scorer.score_graph(npz_format.load_graph(path), gid),
                      kind="stable")[:5]
    np.testing.assert_array_equal(rows[gid], want)


def test_tile_rows_keep_the_compiler_default_unless_confident(
    data, tile_npz, tmp_path):
  files = score_job.find_collections(data, "test")["tile:xla"]
  score_model = build_model(tile_npz, kind="tile")
  probe = export.save(score_model, "tile", str(tmp_path / "probe" / "1"), {})
  scorer = saved_model_scorer.SavedModelScorer(probe)
  scores = {npz_format.graph_id("tile:xla", p): scorer.score_graph(
      npz_format.load_graph(p), npz_format.graph_id("tile:xla", p))
            for p in files}
  # A margin some configs clear and some do not, on these scores.
  leads = np.concatenate([s[0] - s[1:] for s in scores.values()])
  margin = float(np.median(leads[leads > 0])) if np.any(leads > 0) else 0.0
  for name, guard, options in (
      ("calibrated", {"margin": margin}, batch_score.ScoreOptions()),
      ("untrusted", {"margin": None}, batch_score.ScoreOptions()),
      ("off", {"margin": None},
       batch_score.ScoreOptions(default_config=None))):
    model = export.save(score_model, "tile", str(tmp_path / name / "1"),
                        {default_guard.METADATA_KEY: guard})
    out = str(tmp_path / f"{name}.csv")
    score_job.run([model], data, out, collection="tile:xla",
                  beam_args=IN_MEMORY, options=options)
    rows = _rows(out)
    for gid, s in scores.items():
      want = (np.argsort(s, kind="stable") if name == "off" else
              default_guard.guarded_order(s, guard["margin"], 0))[:5]
      np.testing.assert_array_equal(rows[gid], want, err_msg=name)
      if name == "untrusted":
        assert rows[gid][0] == 0
