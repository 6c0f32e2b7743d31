"""Tests for the TFX pipeline: ExampleGen, blessing, Vertex compile, local run."""

import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf
from tfx.types import artifact_utils
from tfx.types import standard_artifacts

from conversion.options import ConvertOptions
from pipeline import configs
from pipeline import example_gen
from pipeline import pipeline as pipeline_lib
from pipeline import ranking_evaluator
from pipeline import runners
from schemas import npz_format
from tests.conftest import tiny_collection
from tpurank import cli

COLLECTION = "layout:xla:random"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  return tiny_collection(tmp_path_factory, COLLECTION, graphs=8, seed=5)


def test_example_gen_keeps_dataset_splits_and_reports_dead_letters(
    data_dir, tmp_path):
  train = npz_format.collection_dir(data_dir, COLLECTION, "train")
  bad = os.path.join(train, "zz_bad.npz")
  with open(bad, "wb") as f:
    f.write(b"garbage")
  try:
    component = example_gen.TpuGraphsExampleGen(
        data_dir, COLLECTION, ConvertOptions(k=4, eval_k=8, hops=1),
        dead_letter_dir=str(tmp_path / "dead"), allow_dead_letters=True)
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / "examples")
    # The component's exec properties, as the orchestrator passes them.
    exec_properties = dict(component.exec_properties)
    executor = example_gen.Executor(
        example_gen.Executor.Context(beam_pipeline_args=[
            "--runner=DirectRunner", "--direct_running_mode=in_memory"],
            tmp_dir=str(tmp_path / "tmp")))
    executor.Do({}, {"examples": [examples]}, exec_properties)
  finally:
    os.remove(bad)
  assert sorted(artifact_utils.decode_split_names(
      examples.split_names)) == ["train", "valid"]
  for split in ("train", "valid"):
    files = tf.io.gfile.glob(os.path.join(examples.uri, f"Split-{split}",
                                          "*"))
    ids = set()
    for r in tf.data.TFRecordDataset(files, compression_type="GZIP"):
      ex = tf.train.Example.FromString(r.numpy())
      ids.add(ex.features.feature["context/graph_id"].bytes_list.value[0])
    # Each split holds exactly the graphs of its own directory.
    want = {npz_format.graph_id(COLLECTION, p).encode() for p in
            tf.io.gfile.glob(os.path.join(npz_format.collection_dir(
                data_dir, COLLECTION, split), "*.npz"))}
    assert ids == want
  with open(tmp_path / "dead" / "train.jsonl") as f:
    dead = [json.loads(line) for line in f]
  assert [os.path.basename(d["file"]) for d in dead] == ["zz_bad.npz"]


@pytest.mark.parametrize("kind,candidate,baseline,threshold,blessed", [
    ("layout", {"kendall_tau": 0.5}, None, 0.2, True),
    ("layout", {"kendall_tau": 0.1}, None, 0.2, False),
    ("layout", {"kendall_tau": 0.5}, {"kendall_tau": 0.6}, 0.2, False),
    ("layout", {"kendall_tau": 0.6}, {"kendall_tau": 0.6}, 0.2, True),
    ("tile", {"top5_error": 0.05}, {"top5_error": 0.1}, 0.5, True),
    ("tile", {"top5_error": 0.6}, None, 0.5, False),
    ("layout", {"kendall_tau": None}, None, 0.2, False),
])
def test_blessing_needs_threshold_and_no_regression(kind, candidate,
                                                    baseline, threshold,
                                                    blessed):
  ok, reason = ranking_evaluator.decide(kind, candidate, baseline, threshold)
  assert ok == blessed
  assert reason


def test_vertex_compile_names_every_component(tmp_path):
  out = str(tmp_path / "pipeline.json")
  pipeline = pipeline_lib.create_pipeline(
      configs.PIPELINE_NAME, "gs://b/root", "gs://b/data", COLLECTION,
      "gs://b/serving/tpurank",
      vertex={"project": "p", "region": "us-central1",
              "image": "gcr.io/p/tpurank:1", "tpu": True})
  runners.compile_vertex(pipeline, "gcr.io/p/tpurank:1", out)
  with open(out) as f:
    spec = json.load(f)["pipelineSpec"]
  tasks = set(spec["root"]["dag"]["tasks"])
  assert {"TpuGraphsExampleGen", "Trainer", "RankingEvaluator",
          "Pusher"} <= tasks
  assert any(t.startswith("latest_blessed_model_resolver") for t in tasks)
  # The Trainer runs trainer.run_fn as a Vertex job on a TPU worker pool.
  text = json.dumps(spec)
  assert "trainer.run_fn.run_fn" in text
  assert "ai_platform_enable_vertex" in text and "cloud-tpu" in text


def test_compiled_spec_runs_every_step_and_dataflow_on_the_image(tmp_path):
  """`pipeline compile`: the image for every step and the Dataflow workers;
  a user's Beam flag replaces only its own default."""
  out = str(tmp_path / "pipeline.json")
  image = "us-docker.pkg.dev/p/r/tpurank:1"
  assert cli.main(["pipeline", "compile", "--target", "vertex", "--project",
                   "p", "--region", "us-central1", "--image", image,
                   "--out", out, "--max_num_workers=4",
                   "--temp_location", "gs://elsewhere/tmp"]) == 0
  with open(out) as f:
    spec = json.load(f)["pipelineSpec"]
  executors = spec["deploymentSpec"]["executors"]
  images = {e["container"]["image"] for e in executors.values()
            if "container" in e}
  assert images == {image}
  gen = next(e for name, e in executors.items() if "ExampleGen" in name)
  args = " ".join(gen["container"]["args"])
  for flag in ("--runner=DataflowRunner", "--project=p",
               "--region=us-central1", f"--sdk_container_image={image}",
               "--sdk_location=container", "--max_num_workers=4",
               "gs://elsewhere/tmp"):
    assert flag in args, flag
  assert "gs://p-tpurank/tmp" not in args


def test_submit_without_credentials_says_what_is_missing(tmp_path,
                                                         monkeypatch):
  monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS",
                     str(tmp_path / "missing.json"))
  from schemas.errors import InputError  # pylint: disable=g-import-not-at-top
  with pytest.raises(InputError, match="credentials.*gcloud auth"):
    runners.submit_vertex(str(tmp_path / "p.json"), "p", "us-central1",
                          "gs://b/root")


@pytest.mark.slow
def test_local_run_pushes_a_blessed_model_and_reruns_from_cache(data_dir,
                                                                tmp_path):
  work = str(tmp_path / "work")
  cmd = [sys.executable, "-m", "tpurank.cli", "pipeline", "run", "--data",
         data_dir, "--collection", COLLECTION, "--work-dir", work,
         "--max-minutes", "0.2", "--threshold", "-1"]

  def run():
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout

  first = run()
  result = json.loads(first.strip().splitlines()[-1])
  assert result["blessed"]
  assert os.path.exists(os.path.join(result["pushed_model"],
                                     "saved_model.pb"))
  assert "| candidate |" in first and "true runtime" in first
  assert "TpuGraphsExampleGen: COMPLETE" in first
  second = run()
  assert "TpuGraphsExampleGen: CACHED" in second
  assert "Trainer: CACHED" in second


def _trainer_training_args(spec: dict) -> dict:
  """The Vertex custom-job args in the compiled Trainer's custom_config."""
  trainer = spec["root"]["dag"]["tasks"]["Trainer"]
  params = trainer["inputs"]["parameters"]
  custom = json.loads(params["custom_config"]["runtimeValue"][
      "constantValue"]["stringValue"])
  return custom["ai_platform_training_args"]


@pytest.mark.parametrize("flags,pools", [
    (["--workers", "3"], [(1, "n1-standard-8"), (2, "n1-standard-8")]),
    (["--tpu-topology", "2x2x1"], [(1, "cloud-tpu")]),
])
def test_compile_asks_vertex_for_worker_pools(tmp_path, flags, pools):
  """`--workers N`: a chief pool of 1 and a worker pool of N-1, the same
  machine and image (Vertex sets TF_CONFIG, the trainer uses MWMS);
  `--tpu-topology`: one TPU pod slice. The pools are valid CustomJobSpec
  fields (checked with Vertex's own client types, offline)."""
  from google.cloud.aiplatform_v1.types import custom_job  # pylint: disable=g-import-not-at-top
  out = str(tmp_path / "pipeline.json")
  image = "us-docker.pkg.dev/p/r/tpurank:1"
  assert cli.main(["pipeline", "compile", "--target", "vertex", "--project",
                   "p", "--region", "us-central1", "--image", image,
                   "--out", out, *flags]) == 0
  with open(out) as f:
    args = _trainer_training_args(json.load(f)["pipelineSpec"])
  specs = args["worker_pool_specs"]
  assert [(p["replica_count"], p["machine_spec"]["machine_type"])
          for p in specs] == pools
  assert {p["container_spec"]["image_uri"] for p in specs} == {image}
  parsed = custom_job.CustomJobSpec(worker_pool_specs=specs)
  assert len(parsed.worker_pool_specs) == len(pools)
  if "--tpu-topology" in flags:
    machine = parsed.worker_pool_specs[0].machine_spec
    assert machine.tpu_topology == "2x2x1"
    assert machine.accelerator_type.name == configs.VERTEX_TPU_POD_ACCELERATOR
    assert machine.accelerator_count == 4


def test_compile_refuses_workers_with_a_tpu(tmp_path, capsys):
  assert cli.main(["pipeline", "compile", "--target", "vertex", "--project",
                   "p", "--region", "r", "--image", "i", "--out",
                   str(tmp_path / "p.json"), "--tpu", "--workers", "2"]) == 2
  assert "--workers: expected 1 with --tpu" in capsys.readouterr().err
