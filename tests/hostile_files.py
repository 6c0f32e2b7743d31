"""Hostile variants of a valid `.npz` graph, built in the tests.

Each writes a file that a careless reader would crash on, hang on, or
allocate without bound for; the readers must turn every one into a
one-line problem naming the file and the field.
"""

import os
import struct
import zipfile

import numpy as np


def huge_declared_shape(good: str, out: str, key: str = "node_feat",
                        shape=(10**9, 140)) -> str:
  """`good` with member `key` declaring `shape` but holding a few bytes."""
  with zipfile.ZipFile(good) as src, zipfile.ZipFile(out, "w") as dst:
    for info in src.infolist():
      if info.filename != key + ".npy":
        dst.writestr(info, src.read(info))
        continue
      with dst.open(key + ".npy", "w") as f:
        np.lib.format.write_array_header_2_0(
            f, {"descr": "<f4", "fortran_order": False, "shape": shape})
        f.write(b"\0" * 64)
  return out


def _patch_headers(data: bytearray, member: bytes, flag_or=0, method=None):
  """Sets flag bits / the compression method of `member` in both the local
  header and the central directory entry of a zip held in `data`."""
  for sig, flag_at, method_at, name_len_at, name_at in (
      (b"PK\x03\x04", 6, 8, 26, 30), (b"PK\x01\x02", 8, 10, 28, 46)):
    start = 0
    while True:
      i = data.find(sig, start)
      if i < 0:
        break
      n = struct.unpack_from("<H", data, i + name_len_at)[0]
      if bytes(data[i + name_at:i + name_at + n]) == member:
        flag = struct.unpack_from("<H", data, i + flag_at)[0]
        struct.pack_into("<H", data, i + flag_at, flag | flag_or)
        if method is not None:
          struct.pack_into("<H", data, i + method_at, method)
      start = i + 4


def zip_feature(good: str, out: str, encrypted: bool = False,
                method=None, member: str = "node_feat.npy") -> str:
  """`good` with one member flagged encrypted or given another method."""
  with open(good, "rb") as f:
    data = bytearray(f.read())
  _patch_headers(data, member.encode(), flag_or=1 if encrypted else 0,
                 method=method)
  with open(out, "wb") as f:
    f.write(bytes(data))
  return out


def fifo(out: str) -> str:
  os.mkfifo(out)
  return out


def device_link(out: str) -> str:
  os.symlink("/dev/zero", out)
  return out


def non_utf8_name(good: str, folder: str) -> str:
  """A copy of `good` whose file name is not valid UTF-8."""
  out = os.path.join(os.fsencode(folder), b"bad-\xff-name.npz")
  with open(good, "rb") as src, open(out, "wb") as dst:
    dst.write(src.read())
  return os.fsdecode(out)
