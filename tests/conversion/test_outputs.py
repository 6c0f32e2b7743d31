"""Outputs never mix runs; flags nobody knows are errors."""

import glob
import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from conversion import graph_files
from conversion import records
from schemas import graph_tensor
from schemas.errors import InputError
from tests.conftest import tiny_collection

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
COLLECTION = "tile:xla"
IN_MEMORY = ["--runner=DirectRunner", "--direct_running_mode=in_memory"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  return tiny_collection(tmp_path_factory, COLLECTION, graphs=5, seed=2)


def _convert(data, out, *extra):
  proc = subprocess.run(
      [sys.executable, "-m", "tpurank.cli", "convert", "--data", data,
       "--collection", COLLECTION, "--out", out, *extra, *IN_MEMORY],
      cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
  return proc.returncode, proc.stdout, proc.stderr


def _records(out):
  files = glob.glob(os.path.join(out, "*", "examples-*.tfrecord.gz"))
  return sum(1 for _ in tf.data.TFRecordDataset(files,
                                                compression_type="GZIP"))


def test_unknown_flag_is_an_error_naming_it(data, tmp_path):
  out = str(tmp_path / "out")
  code, _, err = _convert(data, out, "--max-exmaples", "2")
  assert code == 2, err
  assert "--max-exmaples: expected a flag of this command or a Beam" in err
  assert "Traceback" not in err and not os.path.exists(out)


def _train_configs(out):
  """Configs in the train records (each holds a graph's sample)."""
  files = glob.glob(os.path.join(out, "train", "examples-*.tfrecord.gz"))
  kind = COLLECTION.split(":")[0]
  return sum(int(graph_tensor.parse(kind, s).node_sets["config"].total_size)
             for s in tf.data.TFRecordDataset(files, compression_type="GZIP"))


def test_a_used_output_is_refused_and_overwrite_replaces_it(data, tmp_path):
  out = str(tmp_path / "out")
  code, _, err = _convert(data, out, "--k", "4", "--max-examples", "1")
  assert code == 0, err
  first = json.load(open(os.path.join(out, "conversion.json")))
  first_configs = _train_configs(out)
  code, _, err = _convert(data, out, "--k", "8")
  assert code == 2 and "--overwrite" in err and "earlier run" in err, err
  code, _, err = _convert(data, out, "--k", "8", "--overwrite")
  assert code == 0, err
  second = json.load(open(os.path.join(out, "conversion.json")))
  assert second["options"]["k"] == 8
  # Only this run's shards: the records match its own counts.
  assert _records(out) == sum(s["examples"] for s in second["splits"].values())
  # A train record per graph, with at most k x max-examples configs.
  assert second["splits"]["train"]["examples"] == first["splits"]["train"][
      "examples"]
  assert _train_configs(out) > first_configs == 4 * first["splits"][
      "train"]["examples"]


def test_records_are_reused_only_for_the_same_data_and_options(data,
                                                                tmp_path):
  out = str(tmp_path / "train.tfrecord.gz")
  args = (data, COLLECTION, "train", out)
  counts = records.ensure_split(*args, k=4, hops=1, seed=0, max_examples=8)
  assert counts["graphs"] == len(graph_files.split_files(data, COLLECTION,
                                                         "train")) > 0
  assert records.ensure_split(*args, k=4, hops=1, seed=0,
                              max_examples=8) is None
  with pytest.raises(InputError, match="records of other k"):
    records.ensure_split(*args, k=8, hops=1, seed=0, max_examples=8)
  # A graph file that changed makes the records stale too.
  first = sorted(glob.glob(os.path.join(data, "npz", "tile", "xla", "train",
                                        "*.npz")))[0]
  os.utime(first, ns=(0, 0))
  with pytest.raises(InputError, match="records of other files"):
    records.ensure_split(*args, k=4, hops=1, seed=0, max_examples=8)
