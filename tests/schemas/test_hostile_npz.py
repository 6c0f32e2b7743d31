"""Readers against hostile files: one-line problems, never a crash or a hang,
never an allocation the file's bytes do not back."""

import os
import re

import hypothesis
from hypothesis import strategies as st
import numpy as np
import pytest

from schemas import npz_format
from schemas.errors import InputError
from simulator import synth
from tests import hostile_files


@pytest.fixture(scope="module")
def good(tmp_path_factory):
  path = str(tmp_path_factory.mktemp("good") / "g.npz")
  synth.write_layout_graph(path, np.random.default_rng(0),
                           synth.SCALES["tiny"], "xla", "random")
  assert npz_format.validate_file(path) == []
  return path


def _only_problem(path, field, fragment):
  problems = npz_format.validate_file(path, "layout")
  assert problems, path
  assert problems[0].field == field and fragment in str(problems[0]), (
      problems[0])
  with pytest.raises(InputError, match=re.escape(fragment)):
    npz_format.load_graph(path, "layout")


def test_a_declared_shape_beyond_the_member_is_refused_unread(good,
                                                              tmp_path):
  path = hostile_files.huge_declared_shape(good, str(tmp_path / "h.npz"))
  # 522 GiB declared: refused from the header, nothing allocated.
  _only_problem(path, "node_feat", "declares shape (1000000000, 140)")


def test_a_size_over_the_sanity_limit_is_refused(good, tmp_path):
  n = npz_format.SIZE_LIMITS["n"] + 1
  with np.load(good) as d:
    arrays = {k: d[k] for k in d.files}
  arrays["node_opcode"] = np.zeros(n, np.uint8)  # Real bytes, 5 MB.
  path = str(tmp_path / "big.npz")
  np.savez_compressed(path, **arrays)
  _only_problem(path, "node_opcode", "a sanity limit")


@pytest.mark.parametrize("encrypted,method,fragment", [
    (True, None, "is encrypted"), (False, 99, "compression method 99")])
def test_unsupported_zip_features_are_refused(good, tmp_path, encrypted,
                                              method, fragment):
  path = hostile_files.zip_feature(good, str(tmp_path / "z.npz"),
                                   encrypted, method)
  _only_problem(path, "file", fragment)


@pytest.mark.parametrize("make,fragment", [
    (hostile_files.fifo, "a FIFO"), (hostile_files.device_link, "a device")])
def test_only_regular_files_are_opened(tmp_path, make, fragment):
  # A FIFO would block open() forever; /dev/zero would never end.
  path = make(str(tmp_path / "x.npz"))
  _only_problem(path, "file", fragment)


@hypothesis.settings(max_examples=60, deadline=None, derandomize=True,
                     suppress_health_check=[
                         hypothesis.HealthCheck.function_scoped_fixture])
@hypothesis.given(data=st.data())
def test_any_corruption_is_a_problem_or_a_valid_graph(good, tmp_path, data):
  raw = bytearray(open(good, "rb").read())
  edits = data.draw(st.lists(st.tuples(
      st.integers(0, len(raw) - 1), st.integers(0, 255)), max_size=8))
  for at, value in edits:
    raw[at] = value
  cut = data.draw(st.one_of(st.none(), st.integers(0, len(raw))))
  if cut is not None:
    raw = raw[:cut]
  path = str(tmp_path / "c.npz")
  with open(path, "wb") as f:
    f.write(bytes(raw))
  problems = npz_format.validate_file(path, "layout")  # Never raises.
  if problems:
    assert all(p.path == path and p.field for p in problems)
    with pytest.raises(InputError):
      npz_format.load_graph(path, "layout")
  else:
    graph = npz_format.load_graph(path, "layout")
    assert graph.num_nodes == len(graph.node_feat)
  os.remove(path)
