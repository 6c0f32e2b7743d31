"""Tests for the benchmark suite's measuring and reporting code (not for
any speed: no timing is asserted)."""

import os

import numpy as np
import pytest

from benchmarks import bench_quality
from benchmarks import bench_scaling
from benchmarks import plots
from benchmarks import report
from benchmarks import suite


def test_slopes_tell_linear_from_quadratic_growth():
  xs = [1000, 2000, 8000]
  assert bench_scaling.slopes(xs, [2.0, 4.0, 16.0]) == pytest.approx([1, 1])
  assert bench_scaling.slopes(xs, [1.0, 4.0, 64.0]) == pytest.approx([2, 2])
  assert bench_scaling.slopes(xs, [1.0, 0.0, 2.0]) == [None, None]


def test_embedded_report_moves_headings_down_and_repoints_images(tmp_path):
  out = tmp_path / "results"
  out.mkdir()
  (out / "scaling.md").write_text(
      "# Scaling\n\n## vs nodes\n\n![plot](scaling_nodes.png)\n")
  lines = suite._embed(str(out), "scaling", str(tmp_path))  # pylint: disable=protected-access
  assert lines[:3] == ["## Scaling", "", "### vs nodes"]
  assert "![plot](results/scaling_nodes.png)" in lines
  assert suite._embed(str(out), "missing", str(tmp_path))[0].startswith(  # pylint: disable=protected-access
      "(missing: no report")


def test_quality_trains_each_join_of_layout_models_only():
  layout = bench_quality._models("layout", ["late", "early"], True)  # pylint: disable=protected-access
  assert layout == [("GNN", "GNN", False, None),
                    ("GNN, early join", "GNN-early", False, "early"),
                    ("config-only", "config-only", True, None)]
  # Tile models have no join: the default GNN alone, whatever is asked.
  assert bench_quality._models("tile", ["early"], False) == [  # pylint: disable=protected-access
      ("GNN", "GNN", False, None)]


def test_long_runs_link_only_reports_that_exist(tmp_path, monkeypatch):
  results = tmp_path / "benchmarks" / "results"
  results.mkdir(parents=True)
  (results / "chips_wide.md").write_text("# Chips\n")
  monkeypatch.setattr(suite, "ROOT", str(tmp_path))
  lines = suite._long_runs("chips", str(tmp_path))  # pylint: disable=protected-access
  assert lines[0].endswith(": [benchmarks/results/chips_wide.md]"
                           "(benchmarks/results/chips_wide.md).")
  assert suite._long_runs("quality", str(tmp_path)) == []  # pylint: disable=protected-access
  assert suite._long_runs("serving", str(tmp_path)) == []  # pylint: disable=protected-access


@pytest.mark.slow
def test_scaling_point_measures_every_stage_and_reports_ratios(tmp_path):
  work = tmp_path / "work"
  work.mkdir()
  points = [bench_scaling.measure_point(str(work), n, 40) for n in (200, 400)]
  for p in points:
    assert p["configs"] == 40
    for stage in bench_scaling.STAGES:
      assert p[stage]["seconds"] > 0 and p[stage]["peak_rss_mb"] > 100
    assert p["convert"]["out_mb"] > 0
    assert p["score"]["configs_per_second"] > 0
    assert 0 < p["train"]["examples_per_second"]
  assert points[1]["nodes"] > points[0]["nodes"]
  out = tmp_path / "results"
  report.write_json(str(out / "scaling.md"), {"by_nodes": points,
                                               "by_configs": points})
  table = "\n".join(suite.speed_ratios(str(out)))
  assert f"one graph ({points[1]['nodes']} nodes, 40 configs" in table
  assert "training examples/s" in table and "of the bound" in table
  png = plots.scaling_plot(points, "nodes", str(out / "scaling_nodes.png"))
  with open(png, "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"
  assert os.path.getsize(png) > 10_000
  assert np.isfinite([p["train"]["input_examples_per_second"]
                      for p in points]).all()
