"""How a collection of graphs looks, statistic by statistic, for comparing
simulated TpuGraphs files with real TPU measurements.

Every statistic is read from the `.npz` files alone (what featurizing the
real protos yields and what `tpurank synth` writes), per graph, so that real
and simulated graphs go through the same code. Two conventions both sources
follow: the compiler's default config is config 0 (`tpurank featurize` keeps
the protos' run order, whose default run comes first in the real files;
`tpurank synth` writes the default first), and a tile runtime is normalised
by its default run (`config_runtime_normalizers`).
"""

import dataclasses
from typing import Iterable

import numpy as np

from schemas import npz_format
from schemas import opcodes

# Opcode families for the opcode mix: shares of a graph's nodes.
_FAMILIES = {
    "parameter/constant": {"parameter", "constant", "iota"},
    "dot/convolution": {"dot", "convolution"},
    "reduce": {"reduce", "reduce-window", "select-and-scatter"},
    "data movement": {"reshape", "transpose", "copy", "broadcast", "slice",
                      "dynamic-slice", "dynamic-update-slice", "concatenate",
                      "pad", "gather", "scatter", "bitcast", "reverse"},
    "fusion/call/control": {"fusion", "call", "while", "conditional",
                            "tuple", "get-tuple-element"},
}
FAMILIES = tuple(_FAMILIES) + ("elementwise", "other")


def opcode_family(op_id: int) -> str:
  """The family of an opcode id (see `_FAMILIES`)."""
  name = opcodes.opcode_name(int(op_id))
  for family, names in _FAMILIES.items():
    if name in names:
      return family
  return "elementwise" if name in opcodes.ELEMENTWISE else "other"


def opcode_mix(node_opcode: np.ndarray) -> dict:
  """{family: share of the graph's nodes}."""
  ids, counts = np.unique(node_opcode, return_counts=True)
  mix = dict.fromkeys(FAMILIES, 0.0)
  for op_id, count in zip(ids, counts):
    mix[opcode_family(op_id)] += count / len(node_opcode)
  return mix


def tile_stats(graph: npz_format.Graph) -> dict:
  """Per-kernel statistics of a tile graph with runtimes.

  The default's rank counts configs measured faster than it (0 = best);
  its top-1 error is what always taking the default costs (default / best
  - 1, the paper's slowdown); spread is slowest / fastest.
  """
  rt = graph.config_runtime / np.maximum(graph.config_runtime_normalizers, 1)
  q = np.quantile(rt / rt.min(), [0.5, 0.9])
  return {"configs": graph.num_configs, "nodes": graph.num_nodes,
          "default_rank": int(np.sum(rt < rt[0])),
          "default_top1_error": float(rt[0] / rt.min() - 1),
          "spread": float(rt.max() / rt.min()),
          "median_over_best": float(q[0]), "p90_over_best": float(q[1]),
          **{f"opcode {k}": v for k, v in opcode_mix(graph.node_opcode).items()}}


def layout_stats(graph: npz_format.Graph) -> dict:
  """Per-program statistics of a layout graph with runtimes."""
  rt = graph.config_runtime.astype(np.float64)
  nc = len(graph.node_config_ids)
  return {"configs": graph.num_configs, "nodes": graph.num_nodes,
          "configurable_nodes": nc,
          "configurable_share": nc / graph.num_nodes,
          "spread": float(rt.max() / rt.min()),
          "default_top1_error": float(rt[0] / rt.min() - 1),
          "default_rank_share": float(np.mean(rt < rt[0])),
          **{f"opcode {k}": v for k, v in opcode_mix(graph.node_opcode).items()}}


def collect(paths: Iterable[str]) -> list[dict]:
  """Statistics of every graph with runtimes among `paths`."""
  rows = []
  for path in paths:
    graph = npz_format.load_graph(path)
    if not graph.has_runtimes:
      continue
    rows.append(tile_stats(graph) if graph.kind == npz_format.TILE
                else layout_stats(graph))
  return rows


@dataclasses.dataclass
class Comparison:
  """One statistic, real beside simulated.

  `inside`: whether the simulated collection sits inside the real range.
  With several real graphs, that is the simulated median and mean both
  within the real min..max; with one real graph (one program), whether the
  real value lies within the simulated 5-95% range (the simulator covers it).
  """
  name: str
  real: np.ndarray
  sim: np.ndarray

  @property
  def inside(self) -> bool:
    lo, hi = self.real.min(), self.real.max()
    if len(self.real) == 1:
      slo, shi = np.quantile(self.sim, [0.05, 0.95])
      return bool(slo <= lo <= shi)
    eps = 1e-9 * max(abs(hi), 1)
    return bool(all(lo - eps <= v <= hi + eps
                    for v in (np.median(self.sim), np.mean(self.sim))))

  def share_inside(self) -> float:
    """Share of simulated graphs whose value lies in the real min..max."""
    lo, hi = self.real.min(), self.real.max()
    return float(np.mean((self.sim >= lo) & (self.sim <= hi)))


def compare(real: list[dict], sim: list[dict]) -> list[Comparison]:
  """A `Comparison` per statistic both sides have."""
  names = [k for k in real[0] if k in sim[0]]
  return [Comparison(n, np.array([r[n] for r in real], np.float64),
                     np.array([s[n] for s in sim], np.float64))
          for n in names]
