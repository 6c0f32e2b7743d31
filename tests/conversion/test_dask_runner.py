"""`convert`, `score` and the ExampleGen on Beam's DaskRunner.

A local dask.distributed cluster of 2 worker processes (the same engine as
a cluster of many machines) runs each job; its outputs must equal the
DirectRunner's record for record, and the counts the pipeline wrote must
reconcile with the inputs and with what was actually written.
"""

import collections
import csv
import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf
from tfx.types import standard_artifacts

from conversion import convert
from conversion import convert_job
from conversion.options import ConvertOptions
from pipeline import example_gen
from schemas import npz_format
from serving import score_job
from simulator import synth
from tests.conversion.test_convert_job import BAD
from tests.conversion.test_convert_job import COLLECTION
from tests.conversion.test_convert_job import collection_dir  # pylint: disable=unused-import  # noqa: F401
from tests.serving.conftest import build_model
from trainer import export

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
IN_MEMORY = ["--runner=DirectRunner", "--direct_running_mode=in_memory"]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dask_address():
  """The scheduler address of a local cluster: 2 worker processes, one
  thread each, on localhost (no dashboard)."""
  distributed = pytest.importorskip("distributed")
  cluster = distributed.LocalCluster(
      n_workers=2, processes=True, threads_per_worker=1, host="127.0.0.1",
      dashboard_address=None)
  try:
    yield cluster.scheduler_address
  finally:
    cluster.close()


def _dask(address):
  return ["--runner", "DaskRunner", "--dask_client_address", address]


def _cli(tmp_path, *args):
  env = dict(os.environ, TPURANK_LOG_DIR=str(tmp_path / "logs"))
  return subprocess.run([sys.executable, "-m", "tpurank.cli", *args],
                        cwd=ROOT, capture_output=True, text=True,
                        timeout=600, check=False, env=env)


def _records(files):
  """The tf.Examples of GZIP TFRecord files, serialized deterministically
  (a feature map's order in the bytes varies between processes), as a
  sorted list: a multiset."""
  return sorted(
      tf.train.Example.FromString(r.numpy()).SerializeToString(
          deterministic=True)
      for r in tf.data.TFRecordDataset(sorted(files), compression_type="GZIP"))


def test_convert_on_dask_equals_direct_and_counts_reconcile(
    collection_dir, dask_address, tmp_path):  # pylint: disable=redefined-outer-name  # noqa: F811
  direct = str(tmp_path / "direct")
  convert_job.run(collection_dir, COLLECTION, direct,
                  ConvertOptions(k=4, eval_k=8, hops=1), IN_MEMORY)
  out = str(tmp_path / "dask")
  proc = _cli(tmp_path, "convert", "--data", collection_dir, "--collection",
              COLLECTION, "--out", out, "--k", "4", "--eval-k", "8",
              "--hops", "1", "--max-examples", "0", *_dask(dask_address))
  # Dead letters: everything is written, then exit 2 naming the file.
  assert proc.returncode == 2, proc.stderr
  assert "short_runtimes.npz: config_runtime" in proc.stderr
  assert "Traceback" not in proc.stderr
  files = convert_job.split_files(collection_dir, COLLECTION)
  total = sum(map(len, files.values()))
  assert f"converted: {total}/{total} graphs" in proc.stdout
  summary = json.load(open(os.path.join(out, "conversion.json")))
  assert summary["mismatches"] == []
  counted = json.load(open(os.path.join(out, convert_job.COUNTS_FILE)))
  want = json.load(open(os.path.join(direct, convert_job.COUNTS_FILE)))
  for split, paths in files.items():
    shards = os.path.join(out, split, "examples-*-of-*.tfrecord.gz")
    records = _records(tf.io.gfile.glob(shards))
    # Record for record the DirectRunner's output (as a multiset).
    assert records == _records(tf.io.gfile.glob(
        os.path.join(direct, split, "*.tfrecord.gz"))), split
    s = counted["splits"][split]
    c = s["counts"]
    assert c == want["splits"][split]["counts"] == summary["splits"][split]
    # The counts reconcile with the inputs and with what was written.
    assert c["files_in"] == len(paths) == len(s["files"])
    assert c["graphs_in"] == c["graphs_converted"] + c["dead_letters"]
    assert c["examples"] == len(records) == sum(
        e["examples"] for e in s["files"].values())
    dead = convert.read_jsonl(s["dead_letters_file"])
    assert len(dead) == c["dead_letters"]
    assert sorted(d["file"] for d in dead) == sorted(
        d["file"] for e in s["files"].values() for d in e["dead"])
    shard_files = {e["shard"] for e in s["files"].values() if e["shard"]}
    assert shard_files == set(tf.io.gfile.glob(shards))
  dead = convert_job.read_dead_letters(out)
  assert sorted(os.path.basename(d["file"]) for d in dead) == BAD
  assert sorted(os.listdir(out)) == sorted(os.listdir(direct)) == [
      "conversion.json", "counts.json", "dead_letters", "test", "train",
      "valid"]


def test_score_on_dask_equals_direct_and_counts_reconcile(
    dask_address, layout_npz, tmp_path):
  data = str(tmp_path / "data")
  layout = "layout:nlp:default"
  synth.synth_collection(layout, data, graphs=6, seed=1, scale="tiny",
                         progress=False)
  synth.synth_collection("tile:xla", data, graphs=3, seed=1, scale="tiny",
                         progress=False)
  with open(os.path.join(npz_format.collection_dir(data, layout, "test"),
                         "broken.npz"), "wb") as f:
    f.write(b"PK\x03\x04 truncated")
  model = export.save(build_model(layout_npz), "layout",
                      str(tmp_path / "model" / "1"), {})
  direct = str(tmp_path / "direct.csv")
  want = score_job.run([model], data, direct, split="test",
                       beam_args=IN_MEMORY)
  out = str(tmp_path / "dask.csv")
  proc = _cli(tmp_path, "score", "--model", model, "--data", data, "--out",
              out, "--allow-dead-letters", *_dask(dask_address))
  assert proc.returncode == 0, proc.stderr
  got = json.load(open(out + ".summary.json"))
  assert got["reconciled"] and got["mismatches"] == []
  for key in ("graphs", "rows", "dead_letters", "counts", "metrics"):
    assert got[key] == want[key], key
  # Byte for byte the DirectRunner's rows, metrics and dead letters.
  for suffix in ("", ".metrics.jsonl", ".dead_letters.jsonl"):
    with open(out + suffix) as a, open(direct + suffix) as b:
      assert a.read() == b.read(), suffix
  found = score_job.find_collections(data, "test")
  with open(out) as f:
    rows = list(csv.reader(f))[1:]
  dead = convert.read_jsonl(out + ".dead_letters.jsonl")
  counted = json.load(open(out + score_job.COUNTS_SUFFIX))
  c = counted["counts"]
  # Every input file accounted for: the broken one and the tile graphs
  # (no tile model) as dead letters, every other graph as one row.
  assert len(counted["files"]) == sum(map(len, found.values()))
  assert c["graphs_in"] == len(rows) + len(dead) == got["graphs"]
  assert c["graphs_scored"] == len(rows) == len(found[layout]) - 1
  assert c["dead_letters"] == len(dead) == 1 + len(found["tile:xla"])
  assert c["configs_scored"] == sum(len(r[1].split(";")) for r in rows)


def _example_gen(data, uri, dead_dir, beam_args):
  component = example_gen.TpuGraphsExampleGen(
      data, COLLECTION, ConvertOptions(k=4, eval_k=8, hops=1),
      dead_letter_dir=dead_dir, allow_dead_letters=True)
  examples = standard_artifacts.Examples()
  examples.uri = uri
  executor = example_gen.Executor(example_gen.Executor.Context(
      beam_pipeline_args=beam_args, tmp_dir=os.path.join(uri, "..", "tmp")))
  executor.Do({}, {"examples": [examples]}, dict(component.exec_properties))
  return examples


def test_example_gen_on_dask_equals_direct(collection_dir, dask_address,  # pylint: disable=redefined-outer-name  # noqa: F811
                                           tmp_path):
  direct = _example_gen(collection_dir, str(tmp_path / "direct"),
                        str(tmp_path / "direct_dead"), IN_MEMORY)
  got = _example_gen(collection_dir, str(tmp_path / "dask"),
                     str(tmp_path / "dask_dead"),
                     ["--runner=DaskRunner",
                      f"--dask_client_address={dask_address}"])
  assert got.split_names == direct.split_names
  counted = json.load(open(os.path.join(got.uri, example_gen.COUNTS_FILE)))
  for split in ("train", "valid"):
    files = tf.io.gfile.glob(os.path.join(got.uri, f"Split-{split}", "*"))
    assert all(os.path.basename(f).startswith("data_tfrecord-") for f in files)
    records = _records(files)
    assert records == _records(tf.io.gfile.glob(
        os.path.join(direct.uri, f"Split-{split}", "*")))
    c = counted["splits"][split]["counts"]
    assert c["examples"] == len(records)
    assert c["graphs_in"] == c["graphs_converted"] + c["dead_letters"]
    assert c["dead_letters"] == len(convert.read_jsonl(
        str(tmp_path / "dask_dead" / f"{split}.jsonl")))
  dead = collections.Counter(
      os.path.basename(d["file"]) for d in convert.read_jsonl(
          str(tmp_path / "dask_dead" / "train.jsonl")))
  assert sorted(dead) == BAD
  assert not os.path.exists(os.path.join(got.uri, ".shards"))
