"""Tests for the `tpurank` command line: synth, validate, errors."""

import subprocess
import sys

import numpy as np
import pytest

from tpurank import cli
from tests.conftest import load_dict


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
