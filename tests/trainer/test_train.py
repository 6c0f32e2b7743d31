"""End-to-end training: CLI, resume after interruption, TFX run_fn."""

import csv
import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest

from conversion import options
from simulator import synth
from tests.trainer.helpers import make_records
from trainer import export

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
  out = str(tmp_path_factory.mktemp("data"))
  for c in ("tile:xla", "layout:xla:random"):
    synth.synth_collection(c, out, graphs=5, seed=0, scale="tiny",
                           progress=False)
  return out


def _train(data, out, collection, *extra, wait=True):
  cmd = [sys.executable, "-m", "tpurank.cli", "train", "--collection",
         collection, "--data", data, "--out", out, "--hidden", "16",
         "--layers", "1", "--k", "6", *extra]
  proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
  if not wait:
    return proc
  text, _ = proc.communicate(timeout=600)
  assert proc.returncode == 0, text[-3000:]
  return text


@pytest.mark.slow
@pytest.mark.parametrize("collection,metric", [
    ("tile:xla", "top5_error"), ("layout:xla:random", "kendall_tau")])
def test_cli_trains_and_exports(tiny_data, tmp_path, collection, metric):
  out = str(tmp_path / "run")
  _train(tiny_data, out, collection, "--epochs", "2")
  summary = json.load(open(os.path.join(out, "summary.json")))
  assert metric in summary["valid_metrics"]
  # Every step but the first (tracing) is timed, over both epochs.
  assert summary["timed_steps"] == 2 * summary["steps_per_epoch"] - 1
  assert summary["examples_per_second"] > 0
  assert os.path.exists(os.path.join(out, "export", "1", "saved_model.pb"))
  # Scoring prunes as the training records were pruned.
  assert export.read_metadata(os.path.join(out, "export", "1"))[
      "hops"] == options.DEFAULT_HOPS
  assert os.listdir(os.path.join(out, "logs"))  # TensorBoard events.


@pytest.mark.slow
def test_resume_after_interruption(tiny_data, tmp_path):
  out = str(tmp_path / "run")
  proc = _train(tiny_data, out, "layout:xla:random", "--epochs", "50",
                "--patience", "50", wait=False)
  history = os.path.join(out, "history.csv")
  deadline = time.time() + 400
  while time.time() < deadline:  # Wait for two finished epochs.
    if os.path.exists(history) and len(open(history).readlines()) >= 3:
      break
    time.sleep(0.5)
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  done = [int(r["epoch"]) for r in csv.DictReader(open(history))]
  assert len(done) >= 2
  # The rerun also skips the export, as sweeps and benchmarks do.
  _train(tiny_data, out, "layout:xla:random", "--epochs", str(done[-1] + 3),
         "--patience", "50", "--no-export")
  assert json.load(open(os.path.join(out, "summary.json")))["export"] is None
  assert not os.path.exists(os.path.join(out, "export"))
  epochs = [int(r["epoch"]) for r in csv.DictReader(open(history))]
  # The rerun continued after the last backed-up epoch, not from zero (the
  # backup may be one epoch ahead of the log if the kill fell between).
  assert epochs[len(done)] in (done[-1] + 1, done[-1] + 2)
  assert epochs[-1] == done[-1] + 2


@pytest.mark.slow
def test_tfx_run_fn(tmp_path):
  from tfx.components.trainer import fn_args_utils  # pylint: disable=g-import-not-at-top
  from trainer import run_fn as run_fn_lib  # pylint: disable=g-import-not-at-top
  train, _ = make_records(tmp_path, "tile", graphs=3, k=5, split="train")
  valid, _ = make_records(tmp_path, "tile", graphs=2, k=5, split="valid",
                          seed=1)
  fn_args = fn_args_utils.FnArgs(
      train_files=[train], eval_files=[valid], train_steps=2,
      serving_model_dir=str(tmp_path / "serving"),
      model_run_dir=str(tmp_path / "run"),
      custom_config={"collection": "tile:xla",
                     "hparams": {"epochs": 1, "k": 5},
                     "model": {"hidden": 16, "layers": 1}})
  summary = run_fn_lib.run_fn(fn_args)
  assert os.path.exists(tmp_path / "serving" / "saved_model.pb")
  assert "top5_error" in summary["valid_metrics"]


@pytest.mark.slow
def test_lr_patience_halves_rate_on_plateau(tiny_data, tmp_path):
  out = str(tmp_path / "run")
  # A rate this small cannot move the validation metric, so every epoch after
  # the first is a plateau.
  _train(tiny_data, out, "tile:xla", "--epochs", "4", "--steps-per-epoch",
         "1", "--learning-rate", "1e-9", "--lr-decay", "constant",
         "--lr-patience", "1", "--patience",
         "50", "--dropout", "0.1", "--no-export")
  rates = [float(r["lr"]) for r in csv.DictReader(
      open(os.path.join(out, "history.csv")))]
  assert len(rates) == 4
  assert rates[0] == pytest.approx(1e-9)
  assert rates[-1] < rates[0] / 1.5
  assert all(b <= a for a, b in zip(rates, rates[1:]))


@pytest.mark.slow
def test_cosine_decay_follows_the_step_budget(tiny_data, tmp_path):
  out = str(tmp_path / "run")
  # 4 epochs of 2 steps, far inside the time budget: the step count sets the
  # progress. Each epoch logs the rate of its last step (step 2e + 1 of 8).
  _train(tiny_data, out, "tile:xla", "--epochs", "4", "--steps-per-epoch",
         "2", "--learning-rate", "1e-3", "--patience", "50", "--no-export")
  rates = [float(r["lr"]) for r in csv.DictReader(
      open(os.path.join(out, "history.csv")))]
  floor = 0.05
  want = [1e-3 * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * i / 8)))
          for i in (1, 3, 5, 7)]
  assert rates == pytest.approx(want, rel=1e-4)


def test_lr_patience_needs_a_constant_rate(tiny_data, tmp_path):
  proc = subprocess.run(
      [sys.executable, "-m", "tpurank.cli", "train", "--collection",
       "tile:xla", "--data", tiny_data, "--out", str(tmp_path / "run"),
       "--lr-patience", "2"], cwd=ROOT, capture_output=True, text=True,
      check=False)
  assert proc.returncode == 2
  # One line, no traceback; library start-up lines go to the log.
  assert "Traceback" not in proc.stderr
  assert proc.stderr.strip().splitlines() == [(
      "tpurank: error: <command line>: --lr-patience: expected --lr-decay "
      "constant with it (the cosine decay sets the rate), found --lr-decay "
      "cosine")]
