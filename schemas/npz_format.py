"""The TpuGraphs `.npz` format: collections, fields, validation and loading.

Follows "Dataset File Description" of the official TpuGraphs README:

* tile graphs: `node_feat` (n, 140) float, `node_opcode` (n,) int,
  `edge_index` (m, 2) int, `config_feat` (c, 24) float, `config_runtime` (c,)
  int and `config_runtime_normalizers` (c,) int;
* layout graphs: the same node and edge keys, `node_config_ids` (nc,) int,
  `node_config_feat` (c, nc, 18) float (-1 = compiler default),
  `config_runtime` (c,) int and `node_splits` (s,) or (1, s) int.

An edge row `[u, v]` means node u consumes the output of node v. The README's
dtypes are nominal: any integer width is accepted for integer fields, any
float width for float fields. Test-split files with all-zero runtimes are
valid. Keys beyond these are ignored; tpurank's own writers add none
(the simulator's extras live beside the file, see `extra_path`).
"""

import dataclasses
import os
import zipfile
from typing import Iterable, Iterator, Optional

import numpy as np

from schemas import features
from schemas import opcodes
from schemas.errors import InputError, Problem, fail
from schemas.npz_io import NpzReader

TILE = "tile"
LAYOUT = "layout"
SPLITS = ("train", "valid", "test")
COLLECTIONS = ("tile:xla", "layout:xla:random", "layout:xla:default",
               "layout:nlp:random", "layout:nlp:default")

# Rows of node_config_feat read at a time while validating.
_CHUNK = 2048


def collection_kind(collection: str) -> str:
  """Returns "tile" or "layout" for a collection name such as "tile:xla"."""
  if collection not in COLLECTIONS:
    raise ValueError(f"unknown collection {collection!r}; expected one of "
                     f"{', '.join(COLLECTIONS)}")
  return collection.split(":")[0]


def collection_dir(root: str, collection: str, split: str) -> str:
  """Returns `<root>/npz/<a>/<b>[/<c>]/<split>` for collection `a:b[:c]`."""
  collection_kind(collection)
  if split not in SPLITS:
    raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
  return os.path.join(root, "npz", *collection.split(":"), split)


def graph_id(collection: str, path: str) -> str:
  """The Kaggle id of a graph: `<collection>:<file stem>`."""
  return f"{collection}:{os.path.splitext(os.path.basename(path))[0]}"


@dataclasses.dataclass(frozen=True)
class _Field:
  key: str
  kind: str  # "int" or "float"
  shape: tuple  # ints or symbols: n nodes, m edges, c configs, nc, s


_COMMON = (
    _Field("node_feat", "float", ("n", features.NODE_FEATURES)),
    _Field("node_opcode", "int", ("n",)),
    _Field("edge_index", "int", ("m", 2)),
)
FIELDS = {
    TILE: _COMMON + (
        _Field("config_feat", "float", ("c", features.TILE_CONFIG_FEATURES)),
        _Field("config_runtime", "int", ("c",)),
        _Field("config_runtime_normalizers", "int", ("c",)),
    ),
    LAYOUT: _COMMON + (
        _Field("node_config_ids", "int", ("nc",)),
        _Field("node_config_feat", "float",
               ("c", "nc", features.LAYOUT_CONFIG_FEATURES)),
        _Field("config_runtime", "int", ("c",)),
        _Field("node_splits", "int", ("s",)),
    ),
}
_SYMBOL_NAMES = {"n": "nodes", "m": "edges", "c": "configs",
                 "nc": "configurable nodes", "s": "splits"}
# Sane limits on declared sizes, far above the real dataset's (at most ~44k
# nodes, 100k configs, ~1k configurable nodes): a header beyond them is
# refused before anything is read. Reading a graph holds its arrays other
# than the streamed config features about twice (the arrays and their
# widened copies), so these also bound a reader's memory.
SIZE_LIMITS = {"n": 5_000_000, "m": 20_000_000, "c": 10_000_000,
               "nc": 1_000_000, "s": 5_000_001}


def kind_from_path(path: str) -> Optional[str]:
  """Guesses tile/layout from a path inside the official directory layout."""
  parts = os.path.normpath(os.path.abspath(path)).split(os.sep)
  if "npz" in parts:
    after = parts[parts.index("npz") + 1:]
    if after and after[0] in (TILE, LAYOUT):
      return after[0]
  return None


def _infer_kind(reader: NpzReader) -> Optional[str]:
  """Layout if any layout-only key is there, tile if a tile-only one is."""
  if any(k in reader for k in ("node_config_feat", "node_config_ids",
                               "node_splits")):
    return LAYOUT
  if any(k in reader for k in ("config_feat", "config_runtime_normalizers")):
    return TILE
  return None


def _dtype_ok(kind: str, dtype: np.dtype) -> bool:
  return dtype.kind in ("iu" if kind == "int" else "f")


def _dtype_name(kind: str) -> str:
  return "an integer dtype" if kind == "int" else "a float dtype"


class _Checker:
  """Collects every problem of one file."""

  def __init__(self, path: str):
    self.path = path
    self.problems: list[Problem] = []

  def add(self, field: str, expected: str, found: str):
    self.problems.append(Problem(self.path, field, expected, found))


def _check_header(chk: _Checker, reader: NpzReader, field: _Field,
                  sizes: dict) -> bool:
  """Checks presence, dtype and shape of one field; binds shape symbols."""
  if field.key not in reader:
    chk.add(field.key, "this key (required)", "it missing")
    return False
  try:
    shape, dtype = reader.header(field.key)
  except (ValueError, OSError, zipfile.BadZipFile, EOFError) as e:
    chk.add(field.key, "a readable .npy array", f"unreadable data ({e})")
    return False
  if not _dtype_ok(field.kind, dtype):
    # A float runtime holding NaN gets the more telling message below.
    if not (field.key == "config_runtime" and dtype.kind == "f"):
      chk.add(field.key, _dtype_name(field.kind), f"dtype {dtype}")
      return False
  if field.key == "node_splits" and len(shape) == 2 and shape[0] == 1:
    shape = shape[1:]  # Real files store node_splits as (1, s).
  if len(shape) != len(field.shape):
    chk.add(field.key, f"{len(field.shape)} dimensions "
            f"{_shape_str(field.shape)}", f"shape {tuple(shape)}")
    return False
  for dim, want in zip(shape, field.shape):
    if isinstance(want, int):
      if dim != want:
        chk.add(field.key, f"shape {_shape_str(field.shape)}",
                f"shape {tuple(shape)}")
        return False
    elif dim > SIZE_LIMITS[want]:
      chk.add(field.key, f"at most {SIZE_LIMITS[want]:,} "
              f"{_SYMBOL_NAMES[want]} (a sanity limit)",
              f"shape {tuple(shape)}")
      return False
    elif want not in sizes:
      sizes[want] = (dim, field.key)
    elif sizes[want][0] != dim:
      n, source = sizes[want]
      chk.add(field.key, f"{n} {_SYMBOL_NAMES[want]} along a dimension of "
              f"{_shape_str(field.shape)} (as in {source})",
              f"shape {tuple(shape)}")
      return False
  return True


def _shape_str(shape: tuple) -> str:
  return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1
                                                   else "") + ")"


def _check_range(chk: _Checker, key: str, values: np.ndarray, lo: int,
                 hi: int, what: str):
  if values.size == 0:
    return
  bad = np.flatnonzero((values < lo) | (values > hi))
  if bad.size:
    i = bad[0]
    chk.add(key, f"{what} in [{lo}, {hi}]",
            f"{values.reshape(-1)[i]} at flat index {i} "
            f"({bad.size} out of range)")


def _check_finite(chk: _Checker, key: str, values: np.ndarray, offset=0):
  bad = np.flatnonzero(~np.isfinite(values.reshape(-1)))
  if bad.size:
    chk.add(key, "finite numbers",
            f"{values.reshape(-1)[bad[0]]} at flat index {bad[0] + offset}")


def _check_values(chk: _Checker, reader: NpzReader, kind: str, ok: dict,
                  sizes: dict, config_values: bool = True):
  """Value checks on every field whose header passed."""
  n = sizes.get("n", (0,))[0]
  arrays = {}
  for key in ok:
    if key != "node_config_feat":
      try:
        arrays[key] = reader.read(key)
      except (ValueError, OSError, zipfile.BadZipFile, EOFError) as e:
        chk.add(key, "a readable .npy array", f"unreadable data ({e})")
  if "node_feat" in arrays:
    if n == 0:
      chk.add("node_feat", "at least 1 node", "0 nodes")
    _check_finite(chk, "node_feat", arrays["node_feat"])
  if "node_opcode" in arrays:
    _check_range(chk, "node_opcode", arrays["node_opcode"], 0,
                 opcodes.MAX_OPCODE_ID, "TpuGraphs opcode ids")
  if "edge_index" in arrays:
    _check_edges(chk, arrays["edge_index"], n)
  if "node_config_ids" in arrays:
    ids = arrays["node_config_ids"]
    _check_range(chk, "node_config_ids", ids, 0, n - 1, "node indices")
    if len(np.unique(ids)) != len(ids):
      chk.add("node_config_ids", "distinct node indices", "duplicates")
  if "node_splits" in arrays:
    _check_splits(chk, arrays["node_splits"].reshape(-1), n)
  if "config_feat" in arrays:
    _check_finite(chk, "config_feat", arrays["config_feat"])
  for key in ("config_runtime", "config_runtime_normalizers"):
    if key not in arrays:
      continue
    values = arrays[key]
    if values.dtype.kind == "f":
      nan = np.flatnonzero(np.isnan(values))
      if nan.size:
        chk.add(key, "runtimes in integer nanoseconds",
                f"NaN at index {nan[0]} ({nan.size} NaN)")
      else:
        chk.add(key, "an integer dtype", f"dtype {values.dtype}")
      continue
    neg = np.flatnonzero(values < 0)
    if neg.size:
      chk.add(key, "non-negative runtimes",
              f"{values[neg[0]]} at index {neg[0]} ({neg.size} negative)")
  if "config_runtime" in ok and sizes.get("c", (0,))[0] == 0:
    chk.add("config_runtime", "at least 1 config", "0 configs")
  _check_measured(chk, arrays)
  if "node_config_feat" in ok and config_values:
    _check_layout_configs(chk, reader)


def _check_edges(chk: _Checker, edges: np.ndarray, n: int):
  """Node indices, no self-loop, no repeated row.

  `hlo_encoder.cc` refuses self-edges (`CHECK_NE(from, to)`) and repeated
  rows (`SparseTensorIndicesAreUnique`); a repeated row would count one
  operand twice in message passing.
  """
  _check_range(chk, "edge_index", edges, 0, n - 1, "node indices")
  if edges.size == 0:
    return
  loops = np.flatnonzero(edges[:, 0] == edges[:, 1])
  if loops.size:
    chk.add("edge_index", "no self-loops", f"[{edges[loops[0], 0]}, "
            f"{edges[loops[0], 1]}] at row {loops[0]} ({loops.size} in all)")
  _, first, counts = np.unique(edges, axis=0, return_index=True,
                               return_counts=True)
  if np.any(counts > 1):
    row = int(first[np.argmax(counts > 1)])
    chk.add("edge_index", "distinct rows (operands are deduplicated)",
            f"[{edges[row, 0]}, {edges[row, 1]}] {int(counts.max())} times "
            f"({int(np.sum(counts[counts > 1] - 1))} repeats)")


def _check_measured(chk: _Checker, arrays: dict):
  """Measured runtimes are all positive; test splits hold all zeros.

  The official iterators keep only runs with a positive runtime
  (`tuning_data_iterator.cc`: `compute_time_ns() <= 1` skipped for tiles,
  `CHECK_GT(compute_time_ns, 0)` for modules) and refuse a tile kernel whose
  default run, its normalizer, is 0. A zero among measured runtimes would
  read as the fastest config and a zero normalizer as an infinite label.
  """
  runtime = arrays.get("config_runtime")
  if runtime is None or runtime.dtype.kind not in "iu" or not np.any(
      runtime > 0):
    return
  zero = np.flatnonzero(runtime <= 0)
  if zero.size:
    chk.add("config_runtime", "positive runtimes in a measured file (all 0 "
            "only in a test split)", f"{runtime[zero[0]]} at index {zero[0]} "
            f"({zero.size} of {runtime.size})")
  norm = arrays.get("config_runtime_normalizers")
  if norm is not None and norm.dtype.kind in "iu" and norm.shape == (
      runtime.shape):
    zero = np.flatnonzero(norm <= 0)
    if zero.size:
      chk.add("config_runtime_normalizers", "positive default-config "
              "runtimes where runtimes are measured",
              f"{norm[zero[0]]} at index {zero[0]} ({zero.size} of "
              f"{norm.size})")


def _check_splits(chk: _Checker, splits: np.ndarray, n: int):
  """Computation boundaries as the official encoder writes them.

  `HloEncoder::EncodeHloModule` starts at 0, appends the running instruction
  count after each "cluster"/"while"/"cond" computation and closes with the
  node count, so values lie in [0, n]. Files without the closing boundary
  (written by earlier tools) are accepted too.
  """
  if splits.size == 0:
    chk.add("node_splits", "boundaries starting at 0", "no values")
    return
  _check_range(chk, "node_splits", splits, 0, n, "computation boundaries")
  if splits[0] != 0:
    chk.add("node_splits", "the first boundary 0", f"{splits[0]}")
  drop = np.flatnonzero(np.diff(splits) < 0)
  if drop.size:
    i = drop[0] + 1
    chk.add("node_splits", "non-decreasing boundaries",
            f"{splits[i]} after {splits[i - 1]} at index {i}")


def split_boundaries(splits: np.ndarray, num_nodes: int) -> np.ndarray:
  """Returns `node_splits` as boundaries closed by the node count.

  Computation i holds nodes `b[i]` to `b[i + 1] - 1`, as in the official
  README; files written without the closing boundary get it appended.
  """
  splits = np.asarray(splits, dtype=np.int64).reshape(-1)
  if splits.size and splits[-1] == num_nodes:
    return splits
  return np.append(splits, np.int64(num_nodes))


def _check_config_block(chk: _Checker, block: np.ndarray,
                        configs: np.ndarray):
  """Checks rows of node_config_feat (config indices `configs`): finite,
  and -1 or a dimension index 0..5. Adds the first problem found."""
  flat = block.reshape(-1)
  if not flat.size:
    return
  # The common case in a few passes: NaN fails the range test (min and max
  # propagate it), and int8 holds every valid value exactly.
  if (flat.min() >= -1 and flat.max() < features.MAX_RANK and
      np.array_equal(flat, flat.astype(np.int8))):
    return
  row_items = max(flat.size // max(len(block), 1), 1)
  bad = np.flatnonzero(~np.isfinite(flat))
  if bad.size:
    chk.add("node_config_feat", "finite numbers", f"{flat[bad[0]]} in "
            f"config {configs[bad[0] // row_items]}")
    return
  bad = np.flatnonzero((flat != np.round(flat)) | (flat < -1) |
                       (flat >= features.MAX_RANK))
  if bad.size:
    chk.add("node_config_feat",
            f"-1 or a dimension index 0..{features.MAX_RANK - 1}",
            f"{flat[bad[0]]} in config {configs[bad[0] // row_items]}")


def _check_layout_configs(chk: _Checker, reader: NpzReader):
  """Streams node_config_feat through `_check_config_block`."""
  row = 0
  try:
    for block in reader.iter_rows("node_config_feat", _CHUNK):
      _check_config_block(chk, block, np.arange(row, row + len(block)))
      if chk.problems:
        return
      row += len(block)
  except (ValueError, OSError, zipfile.BadZipFile, EOFError) as e:
    chk.add("node_config_feat", "a readable .npy array",
            f"unreadable data ({e})")


def validate_file(path: str, kind: Optional[str] = None,
                  config_values: bool = True) -> list[Problem]:
  """Checks one `.npz` graph against the TpuGraphs format.

  Args:
    path: The file.
    kind: "tile" or "layout"; guessed from the path, then the keys, if None.
    config_values: Also stream node_config_feat to check its values (False:
      its header only; `Graph` then checks the rows as it streams them).

  Returns:
    Every problem found (empty if the file is valid).
  """
  path = str(path)
  chk = _Checker(path)
  try:
    reader = NpzReader(path)
  except Exception as e:  # pylint: disable=broad-except  (any bad archive)
    chk.add("file", "a NumPy .npz (zip) archive",
            f"{type(e).__name__}: {str(e)[:200]}")
    return chk.problems
  with reader:
    kind = kind or kind_from_path(path)
    kind = kind or _infer_kind(reader)
    if kind is None:
      chk.add("config_feat/node_config_feat",
              "one of them (a tile or a layout graph)", "neither")
      kind = TILE  # Still check the fields both kinds share.
      fields = _COMMON
    else:
      fields = FIELDS[kind]
    sizes = {}
    try:
      ok = {f.key: f for f in fields if _check_header(chk, reader, f, sizes)}
      _check_values(chk, reader, kind, ok, sizes, config_values)
    except Exception as e:  # pylint: disable=broad-except
      # Whatever a hostile file triggers (e.g. a zlib error inside a
      # member) is that file's problem, never a crash of the caller.
      chk.add("file", "a readable NumPy .npz archive",
              f"{type(e).__name__}: {str(e)[:200]}")
  return chk.problems


def find_npz(paths: Iterable[str]) -> Iterator[str]:
  """Yields `.npz` files: each file given, and every one under each dir."""
  for p in paths:
    if os.path.isdir(p):
      for root, dirs, files in os.walk(p):
        dirs.sort()
        for name in sorted(files):
          if name.endswith(".npz"):
            yield os.path.join(root, name)
    else:
      yield p


@dataclasses.dataclass
class Graph:
  """One TpuGraphs graph: its structure in memory, its configs on demand.

  Attributes:
    path: Source file.
    kind: "tile" or "layout".
    node_feat: [n, 140] float32.
    node_opcode: [n] int32.
    edge_index: [m, 2] int32, row [u, v]: u consumes v.
    config_runtime: [c] int64 runtimes (ns; all zero in test splits).
    config_runtime_normalizers: [c] int64 (tile) or None.
    config_feat: [c, 24] float32 (tile) or None.
    node_config_ids: [nc] int32 (layout) or None.
    node_splits: [s] int64 computation boundaries, 0 first and the node
      count last (layout) or None.
    check_streamed: Check node_config_feat's values as they are read
      (`load_graph(..., config_values=False)` left them unchecked).
  """
  path: str
  kind: str
  node_feat: np.ndarray
  node_opcode: np.ndarray
  edge_index: np.ndarray
  config_runtime: np.ndarray
  config_runtime_normalizers: Optional[np.ndarray] = None
  config_feat: Optional[np.ndarray] = None
  node_config_ids: Optional[np.ndarray] = None
  node_splits: Optional[np.ndarray] = None
  check_streamed: bool = False

  @property
  def num_nodes(self) -> int:
    return self.node_feat.shape[0]

  @property
  def num_configs(self) -> int:
    return self.config_runtime.shape[0]

  @property
  def has_runtimes(self) -> bool:
    """False for test-split files, whose runtimes were removed (all zero)."""
    return bool(np.any(self.config_runtime > 0))

  def iter_config_feat(self, chunk: int) -> Iterator[np.ndarray]:
    """Yields the config features in order, `chunk` configs at a time.

    Tile: [<=chunk, 24]; layout: [<=chunk, nc, 18], streamed from disk so
    that a graph with 100k configs never sits in memory whole.
    """
    if self.kind == TILE:
      for start in range(0, self.num_configs, chunk):
        yield self.config_feat[start:start + chunk]
    else:
      start = 0
      with NpzReader(self.path) as reader:
        blocks = reader.iter_rows("node_config_feat", chunk)
        while True:
          try:
            block = next(blocks, None)
          except (ValueError, OSError, zipfile.BadZipFile, EOFError) as e:
            if not self.check_streamed:
              raise
            raise fail(self.path, "node_config_feat", "a readable .npy "
                       "array", f"unreadable data ({e})") from e
          if block is None:
            return
          yield self._checked(block, np.arange(start, start + len(block)))
          start += len(block)

  def take_config_feat(self, indices: np.ndarray) -> np.ndarray:
    """Returns the config features of the configs at `indices`."""
    if self.kind == TILE:
      return self.config_feat[indices]
    with NpzReader(self.path) as reader:
      return self._checked(reader.take_rows("node_config_feat", indices),
                           np.asarray(indices))

  def _checked(self, block: np.ndarray, configs: np.ndarray) -> np.ndarray:
    """float32 config rows, checked first if `check_streamed`.

    Raises:
      InputError: Naming the file, node_config_feat and the config.
    """
    if self.check_streamed:
      chk = _Checker(self.path)
      _check_config_block(chk, block, configs)
      if chk.problems:
        raise InputError(chk.problems[0])
    return block.astype(np.float32, copy=False)

  def read_extra(self, key: str) -> Optional[np.ndarray]:
    """Reads a sidecar array outside the format, None if absent."""
    path = extra_path(self.path, key)
    if not os.path.isfile(path):
      return None
    return np.load(path, allow_pickle=False)


def extra_path(path: str, key: str) -> str:
  """Where data outside the official key set lives: `<stem>.<key>.npy`.

  Beside the graph, so it travels with it, but not a `*.npz`: the official
  loaders glob `<split>/*.npz` and `np.load` every key, so an extra key in
  the graph file or an extra `.npz` there would reach them.
  """
  return f"{os.path.splitext(str(path))[0]}.{key}.npy"


def load_graph(path: str, kind: Optional[str] = None,
               validate: bool = True, config_values: bool = True) -> Graph:
  """Loads a graph's structure and runtimes; config features stay on disk.

  Args:
    path: An `.npz` file.
    kind: "tile" or "layout", or None to infer it.
    validate: Check the whole file first (streams the config features once).
    config_values: With `validate`, check node_config_feat's values in that
      pass too; False: as they are read (`Graph.iter_config_feat`), which
      saves a pass of decompression for a caller that reads them once.

  Returns:
    The graph, with integer fields widened to the README's dtypes.

  Raises:
    InputError: On the first problem found, naming the file and the field.
  """
  path = str(path)
  if validate:
    problems = validate_file(path, kind, config_values)
    if problems:
      raise InputError(problems[0])
  try:
    graph = _read_graph(path, kind)
    graph.check_streamed = validate and not config_values
    return graph
  except InputError:
    raise
  except Exception as e:  # pylint: disable=broad-except  (e.g. changed file)
    raise fail(path, "file", "a readable NumPy .npz archive",
               f"{type(e).__name__}: {str(e)[:200]}") from e


def _read_graph(path: str, kind: Optional[str]) -> Graph:
  """`load_graph` without validation or error wrapping."""
  with NpzReader(path) as reader:
    kind = kind or kind_from_path(path) or _infer_kind(reader)
    get = reader.read
    graph = Graph(
        path=path,
        kind=kind,
        node_feat=get("node_feat").astype(np.float32, copy=False),
        node_opcode=get("node_opcode").astype(np.int32, copy=False),
        edge_index=get("edge_index").astype(np.int32, copy=False).reshape(
            -1, 2),
        config_runtime=get("config_runtime").astype(np.int64, copy=False))
    if kind == TILE:
      graph.config_feat = get("config_feat").astype(np.float32, copy=False)
      graph.config_runtime_normalizers = get(
          "config_runtime_normalizers").astype(np.int64, copy=False)
    else:
      graph.node_config_ids = get("node_config_ids").astype(np.int32,
                                                            copy=False)
      graph.node_splits = split_boundaries(get("node_splits"),
                                           graph.num_nodes)
  return graph
