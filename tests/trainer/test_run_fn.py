"""Tests for the TFX Trainer entry point's configuration."""

import types

from trainer import run_fn


def _fn_args(tmp_path):
  return types.SimpleNamespace(
      custom_config={"collection": "layout:xla:random",
                     "hparams": {"max_minutes": 1}},
      train_steps=None, train_files=[str(tmp_path / "train")],
      eval_files=[str(tmp_path / "valid")],
      model_run_dir=str(tmp_path / "run"),
      serving_model_dir=str(tmp_path / "serving"))


def test_tensorboard_logs_go_where_vertex_asks(tmp_path, monkeypatch):
  monkeypatch.delenv(run_fn.VERTEX_TENSORBOARD_ENV, raising=False)
  cfg = run_fn.config_from_fn_args(_fn_args(tmp_path))
  assert cfg.log_dir is None and cfg.max_minutes == 1
  monkeypatch.setenv(run_fn.VERTEX_TENSORBOARD_ENV, "gs://b/tb/run-1")
  cfg = run_fn.config_from_fn_args(_fn_args(tmp_path))
  assert cfg.log_dir == "gs://b/tb/run-1"
  assert cfg.out_dir == str(tmp_path / "run")
