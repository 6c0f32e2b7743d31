"""Tests for streaming npz reading and writing."""

import numpy as np
import pytest

from schemas.npz_io import NpzReader, NpzWriter


@pytest.mark.parametrize("compress", [True, False])
def test_streamed_member_equals_whole_array_and_np_load_reads_it(
    tmp_path, compress):
  rng = np.random.default_rng(0)
  big = rng.normal(size=(1001, 7, 18)).astype(np.float32)
  small = np.arange(5, dtype=np.uint8)
  path = tmp_path / "a.npz"
  with NpzWriter(path, compress=compress) as w:
    w.write("small", small)
    with w.stream("big", big.shape, big.dtype) as append:
      for start in range(0, len(big), 300):
        append(big[start:start + 300])
  with np.load(path) as d:
    np.testing.assert_array_equal(d["big"], big)
    np.testing.assert_array_equal(d["small"], small)
  with NpzReader(path) as r:
    assert sorted(r.keys) == ["big", "small"]
    assert r.header("big") == (big.shape, np.dtype(np.float32))
    chunks = list(r.iter_rows("big", 128))
    assert [len(c) for c in chunks] == [128] * 7 + [105]
    np.testing.assert_array_equal(np.concatenate(chunks), big)
    idx = np.array([1000, 3, 3, 500, 0])
    np.testing.assert_array_equal(r.take_rows("big", idx, chunk=64), big[idx])


def test_reader_reads_files_written_by_numpy(tmp_path):
  a = np.arange(12, dtype=np.int64).reshape(6, 2)
  np.savez_compressed(tmp_path / "c.npz", a=a)
  with NpzReader(tmp_path / "c.npz") as r:
    np.testing.assert_array_equal(np.concatenate(list(r.iter_rows("a", 4))), a)


def test_same_content_gives_same_bytes(tmp_path):
  for name in ("x.npz", "y.npz"):
    with NpzWriter(tmp_path / name) as w:
      w.write("a", np.arange(10))
  assert (tmp_path / "x.npz").read_bytes() == (tmp_path / "y.npz").read_bytes()


def test_stream_rejects_wrong_row_count(tmp_path):
  with pytest.raises(ValueError, match="wrote 2 rows, declared 3"):
    with NpzWriter(tmp_path / "z.npz") as w:
      with w.stream("a", (3, 2), np.int32) as append:
        append(np.zeros((2, 2)))
