"""Multi-worker training (MultiWorkerMirroredStrategy) with 2 local worker
processes on localhost ports: the same step as one worker on the same global
batch, one export, resume after a worker is killed; TF_CONFIG checks."""

import csv
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import types

import numpy as np
import pytest

from schemas.errors import InputError
from simulator import synth
from tests.trainer.helpers import make_records
from trainer import distribute
from trainer import input_fn
from trainer import run_fn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def _env(tf_config=None):
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
  env.pop(distribute.TF_CONFIG_ENV, None)
  if tf_config:
    env[distribute.TF_CONFIG_ENV] = tf_config
  return env


def _start(cmd, tf_config, log):
  return subprocess.Popen(cmd, cwd=ROOT, env=_env(tf_config),
                          stdout=open(log, "w"), stderr=subprocess.STDOUT)


def _finish(procs, logs, timeout=300):
  for p, log in zip(procs, logs):
    try:
      p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
      for q in procs:
        q.kill()
      raise
    assert p.returncode == 0, open(log).read()[-3000:]


# --- TF_CONFIG: checked, one-line errors; Vertex's format counted. ---

@pytest.mark.parametrize("value,field", [
    (None, "(environment variable)"),
    ("{not json", "(value)"),
    ('{"task": {"type": "worker", "index": 0}}', "cluster"),
    ('{"cluster": {"worker": ["localhost"]}, "task": {"type": "worker", '
     '"index": 0}}', "cluster.worker"),
    ('{"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "chief", '
     '"index": 0}}', "task.type"),
    ('{"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", '
     '"index": 2}}', "task.index"),
])
def test_bad_tf_config_names_the_field(value, field):
  env = {} if value is None else {"TF_CONFIG": value}
  with pytest.raises(InputError) as e:
    distribute.read_tf_config(env)
  assert str(e.value).startswith(f"TF_CONFIG: {field}: expected ")


def test_cli_multi_worker_without_tf_config_is_one_line_error(tmp_path):
  proc = subprocess.run(
      [sys.executable, "-m", "tpurank.cli", "train", "--collection",
       "tile:xla", "--data", str(tmp_path), "--out", str(tmp_path / "run"),
       "--multi-worker"], cwd=ROOT, env=_env(), capture_output=True,
      text=True, check=False)
  assert proc.returncode == 2
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and "Traceback" not in proc.stderr
  assert lines[0].startswith("tpurank: error: TF_CONFIG: (environment "
                             "variable): expected the cluster as JSON")


def test_run_fn_picks_multi_worker_under_vertex_tf_config(tmp_path,
                                                          monkeypatch):
  fn_args = types.SimpleNamespace(
      custom_config={"collection": "tile:xla"}, train_steps=None,
      train_files=[str(tmp_path)], eval_files=[str(tmp_path)],
      model_run_dir=str(tmp_path / "run"),
      serving_model_dir=str(tmp_path / "serving"))
  monkeypatch.delenv("TF_CONFIG", raising=False)
  assert not run_fn.config_from_fn_args(fn_args).multi_worker
  # Vertex AI: one replica still gets a TF_CONFIG (a lone chief).
  monkeypatch.setenv("TF_CONFIG", distribute.localhost_tf_configs(1, vertex=True)[0])
  assert not run_fn.config_from_fn_args(fn_args).multi_worker
  for config in distribute.localhost_tf_configs(3, vertex=True):
    monkeypatch.setenv("TF_CONFIG", config)
    assert distribute.training_workers() == 3
    assert run_fn.config_from_fn_args(fn_args).multi_worker
  # A TPU job's hosts are TPUStrategy's.
  fn_args.custom_config["hparams"] = {"tpu": "local"}
  assert not run_fn.config_from_fn_args(fn_args).multi_worker


@pytest.mark.parametrize("num_files,policy", [(1, "data"), (3, "files")])
def test_shards_split_the_examples_exactly(tmp_path, num_files, policy):
  files = [make_records(tmp_path, "tile", graphs=2, k=4, seed=s)[0]
           for s in range(num_files)]
  assert input_fn.shard_policy(len(files), 2) == policy
  everything = sorted(r.numpy() for r in input_fn.read_records(files))
  shards = [[r.numpy() for r in input_fn.read_records(
      files, shuffle_files=True, seed=i, shard=(2, i))] for i in range(2)]
  # Each example goes to exactly one worker.
  assert sorted(shards[0] + shards[1]) == everything
  assert shards[0] and shards[1]


# --- 2 worker processes. ---

_STEP_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import tensorflow as tf
    from trainer import distribute, hparams, input_fn, model as model_lib
    from trainer import train as train_lib

    mode, path, out, init = sys.argv[1:5]
    kind, k, global_batch, lr = "layout", 5, 4, 0.1
    # As train() does: the strategy before any op.
    strategy = distribute.pick_strategy(multi_worker=mode == "workers")
    tf.keras.utils.set_random_seed(0)
    per_replica = global_batch // strategy.num_replicas_in_sync
    _, biggest = input_fn.scan_examples([path], kind, k)
    constraints = input_fn.constraints_for(biggest, per_replica)

    def dataset_fn(ctx=None):  # train()'s, without shuffling.
      shard = ((ctx.num_input_pipelines, ctx.input_pipeline_id)
               if ctx and ctx.num_input_pipelines > 1 else None)
      return input_fn.train_dataset([path], kind, per_replica, k,
                                    shuffle_buffer=1,
                                    size_constraints=constraints, shard=shard)

    sample, _ = next(iter(dataset_fn()))
    with strategy.scope():
      sm = model_lib.build_score_model(
          hparams.ModelConfig(kind=kind, hidden=16, layers=2), sample.spec,
          train_lib.feature_stats.compute([path], kind))
      ranker = model_lib.RankingModel(sm, per_replica, k)
      # SGD: the update is lr x the gradient (Adam's first step is not).
      ranker.compile(optimizer=tf.keras.optimizers.SGD(lr),
                     loss=train_lib.LOSSES["listmle"]())
    ranker(sample)
    if mode == "single":
      np.savez(init, *ranker.get_weights())
    else:
      with np.load(init) as w:
        ranker.set_weights([w[f"arr_{i}"] for i in range(len(w.files))])
    data = strategy.distribute_datasets_from_function(dataset_fn)

    @tf.function
    def global_loss(batch):
      # Keras scales each replica's loss by 1/replicas: the sum is the
      # loss of the global batch.
      per = strategy.run(lambda g, y: ranker.compute_loss(
          y=y, y_pred=ranker(g, training=True)), args=batch)
      return strategy.reduce("SUM", per, axis=None)

    loss = float(global_loss(next(iter(data))))
    ranker.fit(data, epochs=1, steps_per_epoch=1, verbose=0)
    if distribute.is_chief(strategy):
      np.savez(out, loss, *ranker.get_weights())
    print("OK", mode, loss)
""")


@pytest.mark.slow
def test_two_workers_take_the_same_step_as_one_on_the_global_batch(
    tmp_path):
  path, _ = make_records(tmp_path, "layout", graphs=2, k=5)
  init = str(tmp_path / "init.npz")
  one, two = str(tmp_path / "one.npz"), str(tmp_path / "two.npz")
  cmd = [sys.executable, "-c", _STEP_SCRIPT]
  log = str(tmp_path / "single.log")
  _finish([_start(cmd + ["single", path, one, init], None, log)], [log])
  logs = [str(tmp_path / f"w{i}.log") for i in range(2)]
  _finish([_start(cmd + ["workers", path, two, init], c, log)
           for c, log in zip(distribute.localhost_tf_configs(2), logs)], logs)
  with np.load(init) as w0, np.load(one) as a, np.load(two) as b:
    start = [w0[f"arr_{i}"] for i in range(len(w0.files))]
    single = [a[f"arr_{i}"] for i in range(len(a.files))]
    multi = [b[f"arr_{i}"] for i in range(len(b.files))]
  assert len(single) == len(multi) == len(start) + 1
  np.testing.assert_allclose(multi[0], single[0], rtol=1e-5)  # The loss.
  moved = 0
  for w, s, m in zip(start, single[1:], multi[1:]):
    # SGD: (start - after) / lr is the gradient.
    np.testing.assert_allclose((w - m) / 0.1, (w - s) / 0.1, rtol=1e-3,
                               atol=1e-5)
    moved += int(np.abs(w - s).max() > 0)
  assert moved > len(start) // 2  # The step changed most weights.


_RUN_FN_SCRIPT = textwrap.dedent("""
    import json, sys
    from tfx.components.trainer import fn_args_utils
    from tfx.dsl.io import fileio
    from trainer import run_fn
    train, valid, tmp = sys.argv[1:4]
    fn_args = fn_args_utils.FnArgs(
        train_files=[train], eval_files=[valid], train_steps=2,
        serving_model_dir=tmp + "/serving", model_run_dir=tmp + "/run",
        custom_config={"collection": "tile:xla",
                       "hparams": {"epochs": 2, "k": 5},
                       "model": {"hidden": 16, "layers": 1}})
    summary = run_fn.run_fn(fn_args)
    # What TFX's GenericExecutor checks on every replica after run_fn.
    assert fileio.exists(fn_args.serving_model_dir), "no model"
    print("SUMMARY", json.dumps({k: summary[k] for k in (
        "workers", "replicas", "export", "xla")}))
""")


@pytest.mark.slow
def test_run_fn_on_a_vertex_cluster_exports_once(tmp_path):
  train, _ = make_records(tmp_path, "tile", graphs=3, k=5, split="train")
  valid, _ = make_records(tmp_path, "tile", graphs=2, k=5, split="valid",
                          seed=1)
  cmd = [sys.executable, "-c", _RUN_FN_SCRIPT, train, valid, str(tmp_path)]
  logs = [str(tmp_path / f"w{i}.log") for i in range(2)]
  _finish([_start(cmd, c, log) for c, log in zip(
      distribute.localhost_tf_configs(2, vertex=True), logs)], logs)
  for log in logs:
    line = next(x for x in open(log) if x.startswith("SUMMARY"))
    summary = json.loads(line.split(" ", 1)[1])
    assert summary["workers"] == summary["replicas"] == 2
    # XLA has no CPU kernels for the cross-worker collectives.
    assert summary["xla"] is False
    assert summary["export"] == str(tmp_path / "serving")
  assert os.path.exists(tmp_path / "serving" / "saved_model.pb")
  # The chief's export only: nothing of the worker's is left anywhere.
  left = [os.path.join(d, n) for d, dirs, files in os.walk(tmp_path)
          for n in dirs + files if "workertemp" in n or ".tmp-" in n]
  assert not left
  assert os.path.exists(tmp_path / "run" / "history.csv")


def _epochs(out):
  path = os.path.join(out, "history.csv")
  if not os.path.exists(path):
    return []
  return [int(r["epoch"]) for r in csv.DictReader(open(path))]


@pytest.mark.slow
def test_cli_resumes_from_the_chief_backup_after_a_worker_is_killed(
    tmp_path):
  data = str(tmp_path / "data")
  synth.synth_collection("tile:xla", data, graphs=5, seed=0, scale="tiny",
                         progress=False)
  out = str(tmp_path / "run")
  epochs = 8
  cmd = [sys.executable, "-m", "tpurank.cli", "train", "--collection",
         "tile:xla", "--data", data, "--out", out, "--hidden", "16",
         "--layers", "1", "--k", "6", "--epochs", str(epochs),
         "--steps-per-epoch", "2", "--patience", "50", "--multi-worker"]
  configs = distribute.localhost_tf_configs(2)
  logs = [str(tmp_path / f"first{i}.log") for i in range(2)]
  procs = [_start(cmd, c, log) for c, log in zip(configs, logs)]
  deadline = time.time() + 300
  # Epoch 1 is backed up before its history line is written.
  while time.time() < deadline and not _epochs(out):
    assert all(p.poll() is None for p in procs), open(logs[0]).read()[-2000:]
    time.sleep(0.2)
  procs[1].send_signal(signal.SIGKILL)  # The non-chief worker dies.
  procs[1].wait()
  try:  # The chief fails (its peer is gone) or is stopped too.
    procs[0].wait(timeout=90)
  except subprocess.TimeoutExpired:
    procs[0].kill()
    procs[0].wait()
  done = _epochs(out)
  assert done and done[-1] < epochs - 1, done
  assert os.path.exists(os.path.join(out, "backup", "chief", "checkpoint"))
  assert not os.path.exists(os.path.join(out, "export"))
  # Both restart (new ports: the old may still linger).
  logs = [str(tmp_path / f"second{i}.log") for i in range(2)]
  _finish([_start(cmd, c, log) for c, log in zip(distribute.localhost_tf_configs(2), logs)],
          logs)
  after = _epochs(out)
  # Continued after the last backed-up epoch, not from 0 (the backup may be
  # one epoch ahead of the history if the kill fell between them).
  assert after[len(done)] in (done[-1] + 1, done[-1] + 2), after
  assert after[-1] == epochs - 1
  assert os.path.exists(os.path.join(out, "export", "1", "saved_model.pb"))
  assert os.listdir(os.path.join(out, "export")) == ["1"]
  summary = json.load(open(os.path.join(out, "summary.json")))
  assert summary["workers"] == 2 and summary["export"].endswith("export/1")
  assert not [n for n in os.listdir(out) if "workertemp" in n]
