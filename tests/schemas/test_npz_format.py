"""Tests for the TpuGraphs npz format layer: acceptance and every rejection."""

import os

import numpy as np
import pytest

from schemas import npz_format
from schemas.errors import InputError
from tests.conftest import load_dict


def _fields(problems):
  return [p.field for p in problems]


def test_simulated_files_are_valid(tile_npz, layout_npz):
  assert npz_format.validate_file(tile_npz) == []
  assert npz_format.validate_file(layout_npz) == []


def test_load_graph_widens_dtypes_and_streams_configs(layout_npz):
  g = npz_format.load_graph(layout_npz)
  assert g.kind == "layout"
  assert g.node_opcode.dtype == np.int32 and g.config_runtime.dtype == np.int64
  raw = load_dict(layout_npz)
  full = raw["node_config_feat"]
  np.testing.assert_array_equal(np.concatenate(list(g.iter_config_feat(5))),
                                full)
  idx = np.array([3, 0, len(full) - 1])
  np.testing.assert_array_equal(g.take_config_feat(idx), full[idx])
  assert g.node_splits.ndim == 1


def test_tile_graph_fields(tile_npz):
  g = npz_format.load_graph(tile_npz)
  raw = load_dict(tile_npz)
  assert g.kind == "tile"
  np.testing.assert_array_equal(g.config_feat, raw["config_feat"])
  np.testing.assert_array_equal(g.config_runtime_normalizers,
                                raw["config_runtime_normalizers"])
  np.testing.assert_array_equal(g.take_config_feat(np.array([1, 0])),
                                raw["config_feat"][[1, 0]])


def test_other_integer_widths_are_accepted(make_npz, layout_npz):
  d = load_dict(layout_npz)
  d["node_opcode"] = d["node_opcode"].astype(np.uint8)
  d["edge_index"] = d["edge_index"].astype(np.int64)
  d["node_config_ids"] = d["node_config_ids"].astype(np.int64)
  d["config_runtime"] = d["config_runtime"].astype(np.int64)
  d["node_splits"] = d["node_splits"].reshape(-1).astype(np.int32)  # 1-D too
  assert npz_format.validate_file(make_npz(d), "layout") == []


def test_node_splits_are_boundaries_closed_by_the_node_count(make_npz,
                                                            layout_npz):
  d = load_dict(layout_npz)
  n = len(d["node_opcode"])
  # As the official encoder writes them: 0 ... n, shape (1, s).
  assert d["node_splits"].shape[0] == 1 and d["node_splits"][0, -1] == n
  assert npz_format.validate_file(layout_npz) == []
  closed = npz_format.load_graph(layout_npz).node_splits
  np.testing.assert_array_equal(closed, d["node_splits"][0])
  # Files of earlier tools, without the closing boundary, read the same.
  d["node_splits"] = d["node_splits"][:, :-1]
  path = make_npz(d)
  assert npz_format.validate_file(path) == []
  np.testing.assert_array_equal(npz_format.load_graph(path).node_splits,
                                closed)


def test_test_split_with_zero_runtimes_is_valid(make_npz, tile_npz):
  d = load_dict(tile_npz)
  d["config_runtime"][:] = 0
  d["config_runtime_normalizers"][:] = 0
  path = make_npz(d)
  assert npz_format.validate_file(path, "tile") == []
  assert not npz_format.load_graph(path, "tile").has_runtimes


def test_kind_comes_from_directory_layout(tmp_path, tile_npz):
  folder = tmp_path / "npz" / "layout" / "xla" / "random" / "train"
  folder.mkdir(parents=True)
  target = folder / "g.npz"
  os.rename(tile_npz, target)
  # A tile file in a layout directory lacks the layout keys.
  fields = _fields(npz_format.validate_file(str(target)))
  assert "node_config_ids" in fields and "node_config_feat" in fields


def _mutated(make_npz, source, **changes):
  d = load_dict(source)
  for key, value in changes.items():
    if value is None:
      del d[key]
    else:
      d[key] = value(d[key]) if callable(value) else value
  return make_npz(d)


BAD_CASES = [
    # (name, source fixture, changes, field, text in the message)
    ("missing key", "tile_npz", {"config_feat": None}, "config_feat",
     "missing"),
    ("float in int field", "tile_npz",
     {"edge_index": lambda a: a.astype(np.float32)}, "edge_index",
     "integer dtype"),
    ("strings", "layout_npz",
     {"node_opcode": lambda a: a.astype(str)}, "node_opcode", "integer dtype"),
    ("int in float field", "tile_npz",
     {"node_feat": lambda a: a.astype(np.int32)}, "node_feat", "float dtype"),
    ("wrong feature width", "tile_npz",
     {"node_feat": lambda a: a[:, :139]}, "node_feat", "shape"),
    ("node count mismatch", "tile_npz",
     {"node_opcode": lambda a: a[:-1]}, "node_opcode", "nodes"),
    ("edge out of range", "tile_npz",
     {"edge_index": lambda a: np.concatenate([a, [[0, 10_000]]]).astype(
         a.dtype)}, "edge_index", "10000"),
    ("negative edge", "layout_npz",
     {"edge_index": lambda a: np.concatenate([a, [[-1, 0]]]).astype(a.dtype)},
     "edge_index", "-1"),
    ("self-loop", "tile_npz",
     {"edge_index": lambda a: np.concatenate([a, [[1, 1]]]).astype(a.dtype)},
     "edge_index", "[1, 1] at row"),
    ("repeated edge", "layout_npz",
     {"edge_index": lambda a: np.concatenate([a, a[:1]]).astype(a.dtype)},
     "edge_index", "2 times"),
    ("config id out of range", "layout_npz",
     {"node_config_ids": lambda a: np.where(np.arange(len(a)) == 0, 99_999,
                                            a).astype(a.dtype)},
     "node_config_ids", "99999"),
    ("NaN runtime", "tile_npz",
     {"config_runtime": lambda a: np.where(np.arange(len(a)) == 1, np.nan,
                                           a.astype(np.float64))},
     "config_runtime", "NaN at index 1"),
    ("negative runtime", "layout_npz",
     {"config_runtime": lambda a: np.where(np.arange(len(a)) == 2, -5, a)},
     "config_runtime", "-5 at index 2"),
    ("zero configs", "tile_npz",
     {"config_feat": lambda a: a[:0], "config_runtime": lambda a: a[:0],
      "config_runtime_normalizers": lambda a: a[:0]},
     "config_runtime", "0 configs"),
    ("tile config count mismatch", "tile_npz",
     {"config_runtime": lambda a: a[:-1]}, "config_runtime", "configs"),
    ("layout config count mismatch", "layout_npz",
     {"config_runtime": lambda a: a[:-2]}, "config_runtime", "configs"),
    ("configurable node count mismatch", "layout_npz",
     {"node_config_ids": lambda a: a[:-1]}, "node_config_feat",
     "configurable nodes"),
    ("layout value not a dim", "layout_npz",
     {"node_config_feat": lambda a: np.where(a == -1, 7.5, a).astype(
         np.float32)}, "node_config_feat", "7.5"),
    ("NaN node feature", "tile_npz",
     {"node_feat": lambda a: np.where(np.arange(a.size).reshape(a.shape) == 3,
                                      np.nan, a).astype(np.float32)},
     "node_feat", "nan"),
    ("zero normalizer with measured runtimes", "tile_npz",
     {"config_runtime_normalizers": lambda a: np.where(
         np.arange(len(a)) == 1, 0, a)}, "config_runtime_normalizers",
     "0 at index 1"),
    ("zero among measured runtimes", "layout_npz",
     {"config_runtime": lambda a: np.where(np.arange(len(a)) == 3, 0, a)},
     "config_runtime", "0 at index 3 (1 of"),
    ("split beyond the node count", "layout_npz",
     {"node_splits": lambda a: np.append(a.reshape(-1), 10**6).reshape(1, -1)},
     "node_splits", "1000000"),
    ("decreasing splits", "layout_npz",
     {"node_splits": np.array([[0, 5, 3]], np.int64)}, "node_splits",
     "3 after 5 at index 2"),
    ("splits not starting at 0", "layout_npz",
     {"node_splits": np.array([[2, 5]], np.int64)}, "node_splits",
     "first boundary 0"),
    ("opcode out of range", "tile_npz",
     {"node_opcode": lambda a: (a * 0 + 200).astype(np.int32)},
     "node_opcode", "200"),
]


@pytest.mark.parametrize("name,source,changes,field,text", BAD_CASES,
                         ids=[c[0] for c in BAD_CASES])
def test_bad_input_is_reported_with_file_and_field(request, make_npz, name,
                                                   source, changes, field,
                                                   text):
  del name
  path = _mutated(make_npz, request.getfixturevalue(source), **changes)
  problems = npz_format.validate_file(path)
  assert field in _fields(problems), problems
  msg = str(next(p for p in problems if p.field == field))
  assert msg.startswith(path + ": " + field + ": expected ")
  assert text in msg
  with pytest.raises(InputError) as err:
    npz_format.load_graph(path)
  assert str(err.value).startswith(path)


def test_not_an_npz(tmp_path):
  path = tmp_path / "x.npz"
  path.write_text("hello")
  [problem] = npz_format.validate_file(str(path))
  assert problem.field == "file" and "zip" in problem.expected


def test_truncated_file(tmp_path, layout_npz):
  data = open(layout_npz, "rb").read()
  path = tmp_path / "cut.npz"
  path.write_bytes(data[:len(data) // 2])
  problems = npz_format.validate_file(str(path))
  assert problems and all(str(p).startswith(str(path)) for p in problems)


def test_every_problem_is_reported(make_npz, tile_npz):
  path = _mutated(make_npz, tile_npz, config_feat=None,
                  edge_index=lambda a: a.astype(np.float64),
                  config_runtime=lambda a: -a)
  assert {"config_feat", "edge_index", "config_runtime"} <= set(
      _fields(npz_format.validate_file(path)))


def test_collection_paths():
  assert npz_format.collection_dir("/d", "layout:nlp:default", "valid") == (
      "/d/npz/layout/nlp/default/valid")
  assert npz_format.collection_dir("/d", "tile:xla", "test") == (
      "/d/npz/tile/xla/test")
  assert npz_format.graph_id("layout:xla:random", "/a/unet.npz") == (
      "layout:xla:random:unet")
  with pytest.raises(ValueError):
    npz_format.collection_kind("layout:xla")


@pytest.mark.parametrize("bad", [7.0, 6.0, -1.5, -0.5, 0.5, np.nan, -np.inf])
def test_config_values_left_to_the_stream_are_checked_as_they_stream(
    make_npz, layout_npz, bad):
  d = load_dict(layout_npz)
  feat = d["node_config_feat"].copy()
  feat[2, 0, 4] = bad
  path = make_npz(dict(d, node_config_feat=feat))
  with pytest.raises(InputError, match="node_config_feat"):
    npz_format.load_graph(path)
  g = npz_format.load_graph(path, config_values=False)  # Header checks only.
  assert g.check_streamed
  first = next(g.iter_config_feat(2))  # Configs 0-1 are good.
  np.testing.assert_array_equal(first, feat[:2])
  for read in (lambda: list(g.iter_config_feat(2)),
               lambda: g.take_config_feat(np.array([0, 2]))):
    with pytest.raises(InputError) as e:
      read()
    assert e.value.problem.field == "node_config_feat"
    assert e.value.problem.path == path and "in config 2" in str(e.value)
  # Unchecked structure is still refused up front.
  with pytest.raises(InputError, match="node_config_ids"):
    npz_format.load_graph(make_npz(dict(d, node_config_ids=d[
        "node_config_ids"][:-1])), config_values=False)
