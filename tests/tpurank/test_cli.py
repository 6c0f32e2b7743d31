"""Tests for the `tpurank` command line: synth, validate, errors."""

import argparse
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import load_dict
from tpurank import cli
from tpurank.commands import COMMANDS


def test_synth_then_validate(tmp_path, capsys):
  out = str(tmp_path / "d")
  assert cli.main(["synth", "--collection", "all", "--out", out, "--scale",
                   "tiny", "--graphs", "3", "--quiet"]) == 0
  text = capsys.readouterr().out
  assert "SIMULATED" in text and "layout:nlp:default" in text
  assert "SIMULATED" in open(tmp_path / "d" / "SIMULATED.md").read()
  assert cli.main(["validate", "--quiet", out + "/npz"]) == 0
  assert "checked 15 files: 15 valid" in capsys.readouterr().out


def test_validate_reports_each_problem_and_exits_2(tmp_path, make_npz,
                                                   tile_npz, capsys):
  d = load_dict(tile_npz)
  d["config_runtime"] = d["config_runtime"][:-1]
  d["edge_index"] = d["edge_index"].astype(np.float32)
  bad = make_npz(d, "bad.npz")
  assert cli.main(["validate", tile_npz, bad]) == 2
  captured = capsys.readouterr()
  lines = captured.err.strip().splitlines()
  assert len(lines) == 2
  assert all(line.startswith(bad + ": ") for line in lines)
  assert any(": edge_index: expected an integer dtype" in l for l in lines)
  assert "1 valid, 1 with 2 problems" in captured.out


def test_console_errors_are_one_line_without_traceback(tmp_path):
  bad = tmp_path / "x.npz"
  bad.write_bytes(b"PK\x03\x04 truncated")
  for args in (["validate", str(bad)],
               ["validate", str(tmp_path / "missing.npz")],
               ["synth", "--collection", "tile:xla", "--out",
                str(tmp_path), "--graphs", "2"]):
    r = subprocess.run([sys.executable, "-m", "tpurank.cli", *args],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 2, (args, r.stderr)
    assert "Traceback" not in r.stderr + r.stdout
    messages = [l for l in (r.stderr + r.stdout).splitlines()
                if "expected" in l]
    assert len(messages) == 1, r.stderr + r.stdout


def test_unknown_collection_is_a_usage_error(capsys):
  with pytest.raises(SystemExit) as e:
    cli.main(["synth", "--collection", "layout:xla", "--out", "/tmp/x"])
  assert e.value.code == 2
  assert "invalid choice" in capsys.readouterr().err


def _defaults(command, *required):
  parser = cli.build_parser(only=command)
  return parser.parse_args([command, *required])


def test_cli_defaults_come_from_their_one_home():
  # pylint: disable=g-import-not-at-top
  from conversion import options
  from serving import options as serving_options
  from trainer import hparams
  model = hparams.ModelConfig(kind="layout")
  train = _defaults("train", "--collection", "tile:xla", "--data", "d",
                    "--out", "o")
  # None: by kind and join (`options.train_k`), as for --max-examples.
  assert (train.k, train.hops, train.seed) == (None, options.DEFAULT_HOPS,
                                               options.SEED)
  assert [options.train_k(*a) for a in (
      ("tile", None), ("layout", None), ("layout", None, "early"),
      ("layout", 8, "early"))] == [options.K["tile"], options.K["layout"],
                                   options.EARLY_JOIN_K, 8]
  assert hparams.TrainConfig(collection="layout:xla:random", train_files=[],
                             valid_files=[], out_dir="o",
                             export=False).k == options.K["layout"]
  assert (train.gnn, train.hidden, train.layers, train.dropout) == (
      model.gnn, model.hidden, model.layers, model.dropout)
  for flag in ("loss", "learning_rate", "lr_decay", "lr_patience", "epochs",
               "steps_per_epoch", "max_minutes", "patience"):
    assert getattr(train, flag) == getattr(hparams.TrainConfig, flag), flag
  convert = _defaults("convert", "--collection", "tile:xla", "--data", "d",
                      "--out", "o")
  assert (convert.k, convert.eval_k, convert.hops, convert.seed) == (
      None, options.EVAL_K, options.DEFAULT_HOPS, options.SEED)
  # Both commands make the same training data by default: per-kind chunks.
  assert convert.max_examples is None and train.max_examples is None
  assert options.max_examples("layout") == options.MAX_EXAMPLES["layout"]
  score = _defaults("score", "--model", "m", "--data", "d", "--out", "o")
  assert score.k == options.EVAL_K
  rank = _defaults("rank", "--graph", "g.npz")
  assert (rank.k, rank.batch, rank.model_name) == (
      None, None, serving_options.MODEL_NAME)  # By the model's join.
  serve = _defaults("serve", "--model-base", "b")
  assert (serve.host, serve.port, serve.grpc_port, serve.max_op_copies,
          serve.max_concurrent, serve.max_examples) == (
              serving_options.HOST, serving_options.REST_PORT,
              serving_options.GRPC_PORT, serving_options.MAX_OP_COPIES,
              serving_options.MAX_CONCURRENT, serving_options.MAX_EXAMPLES)
  assert serve.max_request_mb * 2**20 == serving_options.MAX_REQUEST_BYTES
  assert (serve.read_timeout, serve.max_connections) == (
      serving_options.READ_TIMEOUT_SECONDS, serving_options.MAX_CONNECTIONS)


def test_every_help_shows_each_default(capsys):
  for command in COMMANDS:
    parser = cli.build_parser(only=command)
    sub = next(a for a in parser._actions  # pylint: disable=protected-access
               if isinstance(a, argparse._SubParsersAction)).choices[command]  # pylint: disable=protected-access
    with pytest.raises(SystemExit):
      parser.parse_args([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for action in sub._actions:  # pylint: disable=protected-access
      default = action.default
      if (not action.option_strings or default is None or default is False
          or default is argparse.SUPPRESS or isinstance(action, argparse.
                                                        _SubParsersAction)):
        continue
      assert f"(default: {default})" in text, (command, action.dest)
