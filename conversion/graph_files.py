"""Graph files of a collection: TpuGraphs `.npz` or raw tuning `.pb`.

Conversion and scoring take either. A raw tuning proto is featurized
(`featurize/tuning.py`) into npz files in a temporary directory that lives
while its graphs are used (config features stream from disk), so both kinds
then flow through the same code. One `.npz` is one graph; one tile
`TuningData` `.pb` holds one graph per kernel.
"""

import contextlib
import glob
import os
import tempfile
from typing import Iterator, NamedTuple

from featurize import tuning
from schemas import npz_format
from schemas import tuning_proto
from schemas.errors import InputError, fail

EXTENSIONS = (".npz", ".pb")


def to_elements(paths) -> list[bytes]:
  """File paths as Beam elements: bytes, so any name (even one that is not
  valid UTF-8, which Beam's string coder cannot carry) reaches the workers,
  where `from_element` restores it and the graph becomes a dead letter."""
  return [os.fsencode(p) for p in paths]


def printable(element) -> str:
  """A path (str or bytes) as text, undecodable bytes as \\xNN escapes."""
  return os.fsencode(element).decode("utf-8", "backslashreplace")


def from_element(element) -> str:
  """The path of a `to_elements` element.

  Raises:
    InputError: the name is not valid UTF-8 (graph ids and outputs are
      text): the caller records the file as a dead letter.
  """
  path = os.fsdecode(element)
  try:
    path.encode("utf-8")
  except UnicodeEncodeError as e:
    raise fail(printable(element), "file name",
               "valid UTF-8 (graph ids are text): rename the file",
               f"undecodable bytes ({e.reason})") from e
  return path


def is_graph_file(path: str) -> bool:
  return path.endswith(EXTENSIONS)


def list_files(folder: str) -> list[str]:
  """Sorted .npz and .pb files directly in `folder`."""
  return sorted(p for p in glob.glob(os.path.join(folder, "*"))
                if is_graph_file(p))


def split_files(data_dir: str, collection: str, split: str) -> list[str]:
  """The graph files (.npz and raw .pb) of one split of a collection."""
  return list_files(npz_format.collection_dir(data_dir, collection, split))


class Opened(NamedTuple):
  """The graphs of one file.

  Attributes:
    graphs: [(graph id, loaded graph)].
    skipped: [InputError], one per tile kernel that the official pipeline
      leaves out (callers turn them into dead letters).
  """
  graphs: list
  skipped: list


@contextlib.contextmanager
def open_graphs(path: str, collection: str) -> Iterator[Opened]:
  """The graphs of one file, valid inside the `with`.

  Raises:
    InputError: the file is unreadable, invalid, or of the wrong kind.
  """
  kind = npz_format.collection_kind(collection)
  if path.endswith(".npz"):
    yield Opened([(npz_format.graph_id(collection, path),
                   npz_format.load_graph(path, kind))], [])
    return
  found, _ = tuning_proto.read(path)
  if found != kind:
    raise fail(path, "file", f"{kind} tuning data for {collection}",
               f"{found} tuning data")
  with tempfile.TemporaryDirectory(prefix="tpurank-pb-") as tmp:
    result = tuning.featurize(path, tmp)
    yield Opened([(npz_format.graph_id(collection, f),
                   npz_format.load_graph(f, kind)) for f in result.files],
                 [InputError(p) for p in result.skipped])
