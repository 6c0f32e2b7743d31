"""Streaming access to `.npz` archives: read or write one array in row chunks.

`np.load` materialises a whole member on access and `np.savez` needs every
array in memory. A full-size layout graph holds up to 100k configs of several
hundred nodes each (GBs of `node_config_feat`), so conversion, scoring and the
simulator read and write that member in chunks of rows instead. Both plain
(stored) and deflated archives work, as both exist in the wild.

A reader checks before it allocates: the path must be a regular file (not a
FIFO or a device, which would block or never end), every member stored or
deflated and not encrypted, and a member's declared shape must fit in the
bytes the member really holds; so reading an array never allocates more
than its real (decompressed) size, whatever its header claims.
"""

import contextlib
import os
import stat
import zipfile
from typing import Iterator

import numpy as np

# A fixed timestamp makes archive bytes depend on content only (same seed,
# same bytes).
_FIXED_DATE_TIME = (1980, 1, 1, 0, 0, 0)


# What np.savez / np.savez_compressed write, and all a reader accepts.
_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflated"}


def check_regular_file(path: str):
  """Raises ValueError unless `path` is (a symlink to) a regular file."""
  mode = os.stat(path).st_mode  # Does not open: a FIFO cannot block here.
  if not stat.S_ISREG(mode):
    what = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if
            stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or
            stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else
            "not a file")
    raise ValueError(f"not a regular file ({what})")


# Bytes decompressed per read: one large `read` of a deflated member
# rebuilds its output buffer as it grows (~2x slower than pieces of this
# size read into place).
_READ_PIECE = 1 << 21


def _read_into(f, array: np.ndarray) -> int:
  """Fills `array` from file `f` in pieces; returns the bytes read (fewer
  than its size only where `f` ends first)."""
  view = memoryview(array.reshape(-1).view(np.uint8))
  done = 0
  while done < len(view):
    n = f.readinto(view[done:done + _READ_PIECE])
    if not n:
      break
    done += n
  return done


class NpzReader:
  """Reads members of an `.npz` archive whole or as chunks of rows.

  Init args:
    path: Path of the archive.

  Raises:
    zipfile.BadZipFile, OSError: If the file is not a readable zip archive.
    ValueError: If it is not a regular file, or a member is encrypted or
      compressed with a method other than stored or deflated.
  """

  def __init__(self, path: str):
    self.path = str(path)
    check_regular_file(self.path)
    self._zip = zipfile.ZipFile(self.path)
    try:
      for info in self._zip.infolist():
        if info.flag_bits & 0x1:
          raise ValueError(f"member {info.filename} is encrypted")
        if info.compress_type not in _METHODS:
          raise ValueError(
              f"member {info.filename} uses compression method "
              f"{info.compress_type} (only stored or deflated are read)")
    except ValueError:
      self._zip.close()
      raise
    self._members = {
        n[:-4]: n for n in self._zip.namelist() if n.endswith(".npy")}

  def close(self):
    self._zip.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()

  @property
  def keys(self) -> list[str]:
    return list(self._members)

  def __contains__(self, key: str) -> bool:
    return key in self._members

  @contextlib.contextmanager
  def _open(self, key: str):
    member = self._members[key]
    with self._zip.open(member) as f:
      version = np.lib.format.read_magic(f)
      if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
      else:
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
      shape = tuple(shape)
      # Python ints: a product of huge dims must not wrap around.
      declared = dtype.itemsize
      for dim in shape:
        declared *= int(dim)
      info = self._zip.getinfo(member)
      # The directory's sizes are claims too: deflate expands at most
      # ~1032x, so a member cannot hold more than that of its real bytes.
      held = info.file_size if info.compress_type == zipfile.ZIP_STORED \
          else min(info.file_size, info.compress_size * 1032)
      held -= f.tell()
      if declared > held:
        raise ValueError(
            f"{key} declares shape {shape} of {dtype} ({declared:,} bytes) "
            f"but its member holds {held:,} bytes")
      yield f, shape, fortran, dtype

  def header(self, key: str) -> tuple[tuple[int, ...], np.dtype]:
    """Returns (shape, dtype) of a member without reading its data."""
    with self._open(key) as (_, shape, _, dtype):
      return shape, dtype

  def read(self, key: str) -> np.ndarray:
    """Reads a whole member (after checking its header against its size)."""
    self.header(key)
    with self._zip.open(self._members[key]) as f:
      return np.lib.format.read_array(f, allow_pickle=False)

  def iter_rows(self, key: str, chunk: int) -> Iterator[np.ndarray]:
    """Yields a member in consecutive chunks of at most `chunk` rows.

    Args:
      key: The member, e.g. "node_config_feat".
      chunk: Rows (entries along axis 0) per yielded array.

    Yields:
      Arrays of shape [<=chunk, *shape[1:]] in order, covering every row.

    Raises:
      ValueError: If the member is truncated or not a row-major array.
    """
    with self._open(key) as (f, shape, fortran, dtype):
      if dtype.hasobject:
        raise ValueError(f"{key} holds Python objects, not numbers")
      if fortran and len(shape) > 1:
        raise ValueError(f"{key} is stored in Fortran order")
      if not shape:
        yield np.frombuffer(f.read(dtype.itemsize), dtype=dtype).reshape(())
        return
      row_items = int(np.prod(shape[1:], dtype=np.int64))
      row_bytes = row_items * dtype.itemsize
      for start in range(0, shape[0], chunk):
        rows = min(chunk, shape[0] - start)
        block = np.empty((rows,) + shape[1:], dtype=dtype)
        if _read_into(f, block) != rows * row_bytes:
          raise ValueError(f"{key} is truncated at row {start}")
        yield block

  def take_rows(self, key: str, indices: np.ndarray,
                chunk: int = 4096) -> np.ndarray:
    """Reads the rows at `indices` (any order) in one streaming pass."""
    indices = np.asarray(indices, dtype=np.int64)
    shape, dtype = self.header(key)
    out = np.empty((len(indices),) + shape[1:], dtype=dtype)
    order = np.argsort(indices, kind="stable")
    sorted_idx = indices[order]
    pos = 0
    start = 0
    for block in self.iter_rows(key, chunk):
      end = start + len(block)
      hi = np.searchsorted(sorted_idx, end, side="left")
      if hi > pos:
        out[order[pos:hi]] = block[sorted_idx[pos:hi] - start]
        pos = hi
      start = end
      if pos == len(indices):
        break
    return out


class NpzWriter:
  """Writes an `.npz` archive member by member, optionally row by row.

  Init args:
    path: Output path.
    compress: Deflate members (level 1: fast, and layout configs compress
      well since most entries are -1).
  """

  def __init__(self, path: str, compress: bool = True):
    self.path = str(path)
    self._compression = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    self._zip = zipfile.ZipFile(
        self.path, "w", compression=self._compression, compresslevel=1)

  def close(self):
    self._zip.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()

  def write(self, key: str, array: np.ndarray):
    """Writes one whole array as member `key`."""
    array = np.ascontiguousarray(array)
    with self.stream(key, array.shape, array.dtype) as append:
      append(array)

  @contextlib.contextmanager
  def stream(self, key: str, shape: tuple[int, ...], dtype):
    """Opens member `key` of known shape; yields a function that appends rows.

    Args:
      key: Member name.
      shape: Final shape of the array (rows along axis 0).
      dtype: Its dtype.

    Yields:
      append(rows): writes the next rows; the total must reach shape[0].

    Raises:
      ValueError: If the rows appended do not add up to the declared shape.
    """
    dtype = np.dtype(dtype)
    info = zipfile.ZipInfo(key + ".npy", date_time=_FIXED_DATE_TIME)
    info.compress_type = self._compression
    info.external_attr = 0o644 << 16
    written = [0]
    with self._zip.open(info, "w", force_zip64=True) as f:
      header = {"descr": np.lib.format.dtype_to_descr(dtype),
                "fortran_order": False, "shape": tuple(shape)}
      np.lib.format.write_array_header_2_0(f, header)

      def append(rows):
        rows = np.ascontiguousarray(rows, dtype=dtype)
        if rows.shape[1:] != tuple(shape[1:]) and shape:
          raise ValueError(f"{key}: rows of shape {rows.shape[1:]}, "
                           f"declared {tuple(shape[1:])}")
        f.write(rows.tobytes())
        written[0] += rows.shape[0] if rows.ndim else 1

      yield append
    expected = shape[0] if shape else 1
    if written[0] != expected:
      raise ValueError(f"{key}: wrote {written[0]} rows, declared {expected}")
