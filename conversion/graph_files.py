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
