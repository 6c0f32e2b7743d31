"""The compiled Vertex AI spec, run task by task as Vertex would run it."""

import json
import os

import pytest

from pipeline import rehearsal
from tests.conftest import tiny_collection
from tpurank import cli

COLLECTION = "layout:xla:random"


@pytest.mark.slow
def test_compiled_spec_runs_as_vertex_would_and_pushes_a_model(
    tmp_path_factory, tmp_path):
  data = tiny_collection(tmp_path_factory, COLLECTION, graphs=8, seed=5)
  spec = str(tmp_path / "pipeline.json")
  serving = str(tmp_path / "serving" / "tpurank")
  # Local directories where gs:// would be; a user's Beam flags replace the
  # Dataflow defaults they name (the rest stay in the spec, unused).
  assert cli.main([
      "pipeline", "compile", "--target", "vertex", "--project", "p",
      "--region", "us-central1", "--image", "us-docker.pkg.dev/p/r/tpurank:1",
      "--out", spec, "--collection", COLLECTION, "--data", data,
      "--root", str(tmp_path / "root"), "--serving-dir", serving,
      "--max-minutes", "0.2", "--threshold", "-1",
      "--runner=DirectRunner", f"--temp_location={tmp_path / 'tmp'}"]) == 0
  run = rehearsal.run(spec, str(tmp_path / "root"),
                      env={"TPURANK_LOG_DIR": str(tmp_path / "logs")})

  # Every task, each after the tasks it reads from.
  with open(spec) as f:
    tasks = json.load(f)["pipelineSpec"]["root"]["dag"]["tasks"]
  assert sorted(run.order) == sorted(tasks)
  for name, task in tasks.items():
    for dep in task.get("dependentTasks", []):
      assert run.order.index(dep) < run.order.index(name)
  # The ExampleGen driver ran before its executor and both saw the data.
  (examples,) = run.outputs["TpuGraphsExampleGen"]["examples"]
  assert json.loads(examples["metadata"]["split_names"]) == ["train",
                                                              "valid"]
  assert os.listdir(os.path.join(examples["uri"], "Split-train"))
  # The blessing carries what Vertex's LatestBlessedModel resolver queries:
  # blessed = 1, and the model's Vertex artifact name (TFX's entrypoint
  # rewrote the id because the evaluator's executor is an Evaluator's).
  (blessing,) = run.outputs["RankingEvaluator"]["blessing"]
  (model,) = run.outputs["Trainer"]["model"]
  assert blessing["metadata"]["blessed"] == 1
  assert blessing["metadata"]["current_model_id"] == model["name"]
  # Ending with a pushed model, in TF Serving's layout.
  (pushed,) = run.outputs["Pusher"]["pushed_model"]
  assert pushed["metadata"]["pushed"] == 1
  versions = os.listdir(serving)
  assert len(versions) == 1 and os.path.exists(
      os.path.join(serving, versions[0], "saved_model.pb"))
  # What could not run as on Vertex is said, not hidden.
  assert any(rehearsal.VERTEX_TRAINER in r for r in run.replaced)
  assert any("resolver" in r for r in run.replaced)
