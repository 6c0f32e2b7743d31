"""Tests for the Beam conversion: examples, dead letters, reconciling counts."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from conversion import convert_job
from conversion.options import ConvertOptions
from schemas import graph_tensor
from schemas import npz_format
from tests import hostile_files
from tests.conftest import tiny_collection

IN_MEMORY = ["--runner=DirectRunner", "--direct_running_mode=in_memory"]
COLLECTION = "layout:xla:random"


@pytest.fixture(scope="module")
def collection_dir(tmp_path_factory):
  """A tiny simulated collection plus one corrupt and one invalid file."""
  root = tiny_collection(tmp_path_factory, COLLECTION, graphs=6, seed=3)
  train = npz_format.collection_dir(root, COLLECTION, "train")
  good = sorted(f for f in os.listdir(train) if f.endswith(".npz"))[0]
  with open(os.path.join(train, "corrupt.npz"), "wb") as f:
    f.write(b"not a zip file")
  with np.load(os.path.join(train, good)) as d:
    arrays = {k: d[k] for k in d.files}
  arrays["config_runtime"] = arrays["config_runtime"][:-1]
  np.savez(os.path.join(train, "short_runtimes.npz"), **arrays)
  good = os.path.join(train, good)
  # Hostile files: none may abort the job or hang it.
  hostile_files.huge_declared_shape(good, os.path.join(train, "huge.npz"))
  hostile_files.zip_feature(good, os.path.join(train, "encrypted.npz"),
                            encrypted=True)
  hostile_files.fifo(os.path.join(train, "fifo.npz"))
  hostile_files.device_link(os.path.join(train, "zero.npz"))
  hostile_files.non_utf8_name(good, train)
  return root


BAD = ["bad-\\xff-name.npz", "corrupt.npz", "encrypted.npz", "fifo.npz",
       "huge.npz", "short_runtimes.npz", "zero.npz"]


def _records(pattern):
  files = tf.io.gfile.glob(pattern)
  return [r.numpy() for r in tf.data.TFRecordDataset(files,
                                                     compression_type="GZIP")]


def test_counts_reconcile_and_bad_files_become_dead_letters(collection_dir,
                                                             tmp_path):
  out = str(tmp_path / "out")
  summary = convert_job.run(collection_dir, COLLECTION, out,
                            ConvertOptions(k=4, eval_k=8, hops=1),
                            IN_MEMORY)
  files = convert_job.split_files(collection_dir, COLLECTION)
  assert summary["mismatches"] == []
  train = summary["splits"]["train"]
  assert train["graphs_in"] == len(files["train"])
  assert train["dead_letters"] == len(BAD)
  assert train["graphs_converted"] == len(files["train"]) - len(BAD)
  dead = convert_job.read_dead_letters(out)
  assert sorted(os.path.basename(d["file"]) for d in dead) == BAD
  assert all(d["reason"] and "\n" not in d["reason"] for d in dead)
  short = next(d for d in dead if "short" in d["file"])
  assert short["field"] == "config_runtime"
  assert "short_runtimes.npz" in short["reason"]
  with open(os.path.join(out, "conversion.json")) as f:
    assert json.load(f)["splits"] == summary["splits"]
  # Every written example is counted, and it parses as the schema says.
  for split, c in summary["splits"].items():
    recs = _records(os.path.join(out, split, "*.tfrecord.gz"))
    assert len(recs) == c["examples"]
    parsed = graph_tensor.parse("layout", recs)
    assert int(tf.reduce_sum(parsed.node_sets["config"].sizes)) == (
        c["configs"] if split != "train" else
        c["configs"] - c["configs_merged"])


def test_valid_examples_hold_every_config_once_in_order(collection_dir,
                                                        tmp_path):
  out = str(tmp_path / "out")
  convert_job.run(collection_dir, COLLECTION, out,
                  ConvertOptions(k=4, eval_k=8, hops=1), IN_MEMORY,
                  splits=["valid"])
  recs = _records(os.path.join(out, "valid", "*.tfrecord.gz"))
  seen = {}
  for r in recs:
    g = graph_tensor.parse("layout", r)
    gid = g.context["graph_id"][0].numpy().decode()
    seen.setdefault(gid, []).append(g.node_sets["config"]["index"].numpy())
  for path in convert_job.split_files(collection_dir, COLLECTION)["valid"]:
    gid = npz_format.graph_id(COLLECTION, path)
    index = np.sort(np.concatenate(seen[gid]))
    n = npz_format.load_graph(path).num_configs
    np.testing.assert_array_equal(index, np.arange(n))


@pytest.mark.slow
def test_cli_default_runner_exits_2_on_dead_letters(collection_dir, tmp_path):
  out = str(tmp_path / "out")
  cmd = [sys.executable, "-m", "tpurank.cli", "convert", "--data",
         collection_dir, "--collection", COLLECTION, "--out", out,
         "--splits", "train", "valid", "--k", "4"]
  env = dict(os.environ, TPURANK_LOG_DIR=str(tmp_path / "logs"))
  proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                        env=env)
  assert proc.returncode == 2, proc.stderr
  assert "short_runtimes.npz: config_runtime" in proc.stderr
  assert "Traceback" not in proc.stderr
  proc = subprocess.run(cmd + ["--allow-dead-letters", "--overwrite"],
                        capture_output=True, text=True, check=False, env=env)
  assert proc.returncode == 0, proc.stderr
  assert json.loads(proc.stdout.strip().splitlines()[-1])["splits"]["train"][
      "dead_letters"] == len(BAD)
  # Progress from the workers, and only tpurank's own lines: library
  # warnings (TensorFlow, Beam workers' FutureWarnings) go to the log the
  # output names.
  total = sum(len(f) for s, f in convert_job.split_files(
      collection_dir, COLLECTION).items() if s in ("train", "valid"))
  assert f"converted: {total}/{total} graphs" in proc.stdout
  assert all(line.startswith("tpurank: ")
             for line in proc.stderr.splitlines()), proc.stderr
  logs = tmp_path / "logs"
  assert all(os.path.getsize(logs / n) for n in os.listdir(logs))  # Empty
  named = proc.stderr.split("library messages (warnings, logs) in ")  # go.
  if len(named) > 1:
    assert os.path.getsize(named[1].strip())
  assert not os.path.exists(os.path.join(out, ".progress"))
