"""Ranking quality over all configs of each graph (outside the loss).

* Kendall tau (scipy, tau-b) between predicted and true runtime order, and
  ordered-pair accuracy (OPA): of the config pairs with different runtimes,
  the share the model orders correctly. Layout collections, beside the
  top-1 slowdown below (how much slower the predicted best config is).
* Top-K slowdown error (TpuGraphs paper): for each graph, the best
  normalised runtime among the model's K top configs over the best of all
  configs, minus 1. Tile collection, K = 1, 5, 10.
Graphs without runtimes (test splits) are skipped.
"""

import collections
from typing import Iterable

import numpy as np
from scipy import stats

TOP_KS = (1, 5, 10)


def kendall_tau(pred_runtime: np.ndarray, runtime: np.ndarray) -> float:
  """Kendall tau-b between two orderings (nan if undefined)."""
  if len(runtime) < 2:
    return float("nan")
  return float(stats.kendalltau(pred_runtime, runtime)[0])


def ordered_pair_accuracy(pred_runtime: np.ndarray,
                          runtime: np.ndarray) -> float:
  """Share of pairs with distinct runtimes that the prediction orders right.

  Exact in O(n log n): derived from tau-b and the tie counts, assuming the
  predictions have no ties (float scores practically never tie).
  """
  n = len(runtime)
  if n < 2:
    return float("nan")
  n0 = n * (n - 1) / 2
  _, counts = np.unique(runtime, return_counts=True)
  ties = float(np.sum(counts * (counts - 1) / 2))
  distinct = n0 - ties
  if distinct == 0:
    return float("nan")
  tau = kendall_tau(pred_runtime, runtime)
  concordant = (distinct + tau * np.sqrt(n0 * distinct)) / 2
  return float(concordant / distinct)


def top_k_error(pred_runtime: np.ndarray, runtime: np.ndarray,
                k: int) -> float:
  """Best runtime among the predicted top k over the true best, minus 1."""
  top = np.argsort(pred_runtime, kind="stable")[:k]
  return float(runtime[top].min() / runtime.min() - 1.0)


def graph_metrics(kind: str, pred_runtime: np.ndarray, runtime: np.ndarray,
                  normalizer=None) -> dict:
  """The metrics of one graph (`pred_runtime`: lower = predicted faster)."""
  if kind == "tile":
    norm = runtime / np.maximum(normalizer, 1)
    return {f"top{k}_error": top_k_error(pred_runtime, norm, k)
            for k in TOP_KS}
  return {"kendall_tau": kendall_tau(pred_runtime, runtime),
          "opa": ordered_pair_accuracy(pred_runtime, runtime),
          "top1_error": top_k_error(pred_runtime, runtime, 1)}


def collection_metrics(kind: str, per_graph: Iterable[dict]) -> dict:
  """Means over graphs of each metric (nan entries ignored)."""
  values = collections.defaultdict(list)
  count = 0
  for g in per_graph:
    count += 1
    for name, v in g.items():
      if isinstance(v, float) and not np.isnan(v):
        values[name].append(v)
  out = {name: float(np.mean(v)) for name, v in values.items()}
  out["graphs"] = count
  return out


# The validation metric that early stopping and blessing watch, and whether
# higher is better.
PRIMARY = {"tile": ("top5_error", "min"), "layout": ("kendall_tau", "max")}
