"""Writes simulated TpuGraphs collections in the official `.npz` layout.

Runtimes are SIMULATED by the analytical cost models in `tile_cost` and
`layout_cost` on one of `hardware.CHIPS`, with lognormal measurement noise;
they are not TPU measurements. Every chip prices the same programs (the
graphs and configurable nodes depend on the seed only). Each graph file holds exactly the official keys; beside it,
`<stem>.config_runtime_noiseless.npy` (float64 ns, `npz_format.extra_path`)
keeps the runtime before noise, so benchmarks can measure the noise ceiling.

Every graph has its own seed derived from (seed, collection, index), and
files are written one at a time with layout configs streamed in chunks, so a
full-scale collection never sits in memory and the same seed gives the same
bytes.
"""

import dataclasses
import os
import zlib
from typing import Optional

import numpy as np
from tqdm import tqdm

from schemas import npz_format
from schemas.node_encoding import encode_graph
from schemas.npz_io import NpzWriter
from simulator import hardware
from simulator import layout_cost
from simulator import programs
from simulator import tile_cost

NOISELESS_KEY = "config_runtime_noiseless"
# Bytes of node_config_feat generated and written at a time (bounds memory).
_CHUNK_BYTES = 32 * 2**20
# Lognormal sigma of measurement noise: kernels are short, so relatively
# noisier than whole programs.
TILE_NOISE = 0.03
LAYOUT_NOISE = 0.004


@dataclasses.dataclass(frozen=True)
class Scale:
  """Size ranges (log-uniform) of one scale."""
  tile_nodes: tuple
  tile_configs: tuple
  layout_nodes: tuple
  layout_configs: tuple
  max_config_nodes: int
  tile_graphs: int  # Default graphs per tile collection.
  layout_graphs: dict  # Default graphs per layout source (xla / nlp).


SCALES = {
    "tiny": Scale((2, 30), (8, 40), (60, 400), (16, 64), 16, 12,
                  {"xla": 6, "nlp": 6}),
    "small": Scale((2, 120), (30, 300), (300, 3000), (100, 1000), 64, 300,
                   {"xla": 40, "nlp": 40}),
    # The real dataset's sizes and graph counts.
    "full": Scale((2, 400), (50, 5000), (1000, 44000), (1000, 100000), 512,
                  7229, {"xla": 84, "nlp": 235}),
}


def split_counts(total: int) -> dict:
  """80/10/10 train/valid/test, at least one graph in each."""
  if total < 3:
    raise ValueError(f"--graphs must be at least 3 (one per split), got {total}")
  held = max(1, round(0.1 * total))
  return {"train": total - 2 * held, "valid": held, "test": held}


def _loguniform(rng, lo_hi) -> int:
  lo, hi = lo_hi
  return int(round(np.exp(rng.uniform(np.log(lo), np.log(hi)))))


def _rng(seed: int, collection: str, index: int) -> np.random.Generator:
  tag = zlib.crc32(collection.encode())
  return np.random.default_rng(np.random.SeedSequence([seed, tag, index]))


def _noisy(rng, noiseless: np.ndarray, sigma: float) -> np.ndarray:
  noisy = noiseless * np.exp(rng.normal(0.0, sigma, noiseless.shape))
  return np.maximum(np.round(noisy), 1)


def write_tile_graph(path: str, rng: np.random.Generator, scale: Scale,
                     chip: hardware.Chip = hardware.DEFAULT):
  """Simulates one kernel and its tile configs on `chip` into `path`."""
  prog = programs.kernel(rng, _loguniform(rng, scale.tile_nodes))
  prof = tile_cost.profile(prog.instructions, chip)
  out_tile, cin_tile = tile_cost.sample_configs(
      prof, rng, _loguniform(rng, scale.tile_configs), chip)
  noiseless = tile_cost.runtime_ns(prof, out_tile, cin_tile, chip)
  default = noiseless[0]  # sample_configs puts the default first.
  node_feat, node_opcode, edge_index = encode_graph(prog.instructions)
  with NpzWriter(path) as w:
    w.write("node_feat", node_feat)
    w.write("node_opcode", node_opcode)
    w.write("edge_index", edge_index)
    w.write("config_feat", tile_cost.config_features(prof, out_tile, cin_tile))
    w.write("config_runtime", _noisy(rng, noiseless, TILE_NOISE).astype(
        np.int64))
    # Each measurement pairs with its own run of the default config.
    w.write("config_runtime_normalizers", _noisy(
        rng, np.full_like(noiseless, default), TILE_NOISE).astype(np.int64))
  np.save(npz_format.extra_path(path, NOISELESS_KEY), noiseless)
  return len(prog.instructions), len(noiseless)


def _sample_choices(rng, variables, count: int, search: str) -> np.ndarray:
  """[count, V] option indices: "random" spreads wide, "default" stays near."""
  sizes = np.array([v.num_options for v in variables])
  if search == "random":
    explicit = 1 + (rng.random((count, len(sizes))) *
                    (sizes - 1)).astype(np.int64)
    keep_default = rng.random((count, len(sizes))) < 0.15
    return np.where(keep_default | (sizes == 1), 0, explicit)
  choices = np.zeros((count, len(sizes)), dtype=np.int64)
  mutable = np.flatnonzero(sizes > 1)
  if mutable.size == 0:
    return choices
  for row in range(count):
    k = min(1 + rng.poisson(1.0), mutable.size)
    for v in rng.choice(mutable, k, replace=False):
      choices[row, v] = 1 + rng.integers(sizes[v] - 1)
  return choices


def write_layout_graph(path: str, rng: np.random.Generator, scale: Scale,
                       source: str, search: str, progress: bool = False,
                       nodes: Optional[int] = None,
                       configs: Optional[int] = None,
                       chip: hardware.Chip = hardware.DEFAULT):
  """Simulates one program and its layout configs into `path`, streaming.

  Args:
    path: Output file.
    rng: All randomness.
    scale: Size ranges (used where `nodes` / `configs` are None).
    source: "xla" or "nlp".
    search: "random" or "default".
    progress: Show a per-config progress bar.
    nodes: Approximate instruction count, overriding the scale.
    configs: Config count, overriding the scale.
    chip: Whose cost model prices the configs.

  Returns:
    (nodes, configs) written.
  """
  prog = programs.whole_program(
      rng, nodes or _loguniform(rng, scale.layout_nodes), source)
  insts = prog.instructions
  config_ids = layout_cost.pick_config_nodes(insts, rng,
                                             scale.max_config_nodes)
  model = layout_cost.build(insts, config_ids, rng, chip)
  hi = scale.layout_configs[1] if search == "random" else max(
      scale.layout_configs[1] // 5, scale.layout_configs[0])
  num_configs = configs or _loguniform(rng, (scale.layout_configs[0], hi))
  node_feat, node_opcode, edge_index = encode_graph(insts)
  noiseless = np.empty(num_configs, dtype=np.float64)
  nc = len(config_ids)
  with NpzWriter(path) as w:
    w.write("node_feat", node_feat)
    w.write("node_opcode", node_opcode)
    w.write("edge_index", edge_index)
    w.write("node_config_ids", config_ids)
    w.write("node_splits", np.array([prog.node_splits], dtype=np.int64))
    bar = tqdm(total=num_configs, unit="config", leave=False,
               disable=None if progress else True,
               desc=os.path.basename(path))
    with w.stream("node_config_feat", (num_configs, nc, 18),
                  np.float32) as append:
      chunk = max(64, _CHUNK_BYTES // max(nc * 18 * 4, 1))
      for start in range(0, num_configs, chunk):
        count = min(chunk, num_configs - start)
        choices = _sample_choices(rng, model.variables, count, search)
        if start == 0:
          choices[0] = 0  # The compiler default is always measured.
        append(model.features(choices, nc))
        noiseless[start:start + count] = model.runtimes(choices)
        bar.update(count)
    bar.close()
    w.write("config_runtime",
            _noisy(rng, noiseless, LAYOUT_NOISE).astype(np.int64))
  np.save(npz_format.extra_path(path, NOISELESS_KEY), noiseless)
  return len(insts), num_configs


def synth_collection(collection: str, out: str, graphs: Optional[int] = None,
                     seed: int = 0, scale: str = "small",
                     progress: bool = True,
                     chip: str = hardware.DEFAULT_CHIP) -> dict:
  """Writes one simulated collection under `out/npz/...`.

  Args:
    collection: e.g. "tile:xla" or "layout:nlp:default".
    out: Root directory (gets `npz/<collection path>/<split>/*.npz`).
    graphs: Graphs in the collection (80/10/10 split); None = the scale's
      default.
    seed: Base seed.
    scale: "tiny", "small" or "full".
    progress: Show progress bars on stderr.
    chip: Name of the `hardware.CHIPS` chip that prices the runtimes.

  Returns:
    Stats: graphs, nodes, configs and bytes written.
  """
  kind = npz_format.collection_kind(collection)
  sc = SCALES[scale]
  priced_on = hardware.chip(chip)
  parts = collection.split(":")
  if graphs is None:
    graphs = sc.tile_graphs if kind == "tile" else sc.layout_graphs[parts[1]]
  stats = {"graphs": 0, "nodes": 0, "configs": 0, "bytes": 0}
  index = 0
  # disable=None: no bar (nor its cursor codes) when not on a terminal.
  bar = tqdm(total=graphs, unit="graph", desc=collection,
             disable=None if progress else True)
  for split, count in split_counts(graphs).items():
    folder = npz_format.collection_dir(out, collection, split)
    os.makedirs(folder, exist_ok=True)
    for _ in range(count):
      rng = _rng(seed, collection, index)
      name = f"sim_{index:05d}"
      path = os.path.join(folder, name + ".npz")
      if kind == "tile":
        nodes, configs = write_tile_graph(path, rng, sc, priced_on)
      else:
        nodes, configs = write_layout_graph(path, rng, sc, parts[1], parts[2],
                                            progress=progress, chip=priced_on)
      stats["graphs"] += 1
      stats["nodes"] += nodes
      stats["configs"] += configs
      stats["bytes"] += os.path.getsize(path)
      index += 1
      bar.update(1)
  bar.close()
  return stats
