"""Keeps the compiler's default config ahead of configs the model is not
confident beat it.

On real TPU kernels the compiler's default tiling is the best or nearly the
best config (benchmarks/bench_realism); a ranker that puts an unproven config
first makes a user run kernels slower than doing nothing. The guard orders
configs as: those the model predicts faster than the default by more than a
calibrated margin (by prediction), then the default, then the rest (by
prediction).

The margin is calibrated once, on the validation split after training, and
stored in the model's metadata (`assets.extra/tpurank_model.json`, key
`default_guard`), so every path that ranks with the model (`tpurank rank`,
`tpurank score`, a TF Serving client reading the SavedModel's assets) uses
the same number. `margin` None means no margin earned the trust: the default
always comes first.

The compiler's default is config 0: `tpurank featurize` keeps the protos' run
order (the default run first in TPU tuning data) and `tpurank synth` writes
the default first. Official TpuGraphs `.npz` files carry no default marker;
`tpurank rank --default-config` names it there.
"""

from typing import Optional

import numpy as np

from trainer import metrics

METADATA_KEY = "default_guard"
# A config goes ahead of the default only where, on validation, configs
# predicted at least that far ahead beat the default this often.
TARGET_PRECISION = 0.9
# Fewer (config, default) pairs than this cannot support the precision.
MIN_SUPPORT = 20


def guarded_order(pred_runtime: np.ndarray, margin: Optional[float],
                  default: int = 0) -> np.ndarray:
  """Config indices, predicted fastest first, the default guarded.

  Args:
    pred_runtime: [c] predictions, lower = predicted faster.
    margin: Calibrated margin (prediction units), or None (default first).
    default: Index of the compiler's default config.
  """
  pred = np.asarray(pred_runtime, np.float64)
  order = np.argsort(pred, kind="stable")
  if margin is None:
    ahead = np.zeros(len(pred), bool)
  else:
    ahead = pred < pred[default] - margin
  ahead[default] = False
  rest = order[~ahead[order] & (order != default)]
  return np.concatenate([order[ahead[order]], [default], rest]).astype(
      np.int64)


def guarded_keys(pred_runtime: np.ndarray, margin: Optional[float],
                 default: int = 0) -> np.ndarray:
  """Rank positions of `guarded_order` (lower = first), for metrics that
  sort predictions."""
  keys = np.empty(len(pred_runtime), np.float64)
  keys[guarded_order(pred_runtime, margin, default)] = np.arange(
      len(pred_runtime))
  return keys


def _normalised(g: dict) -> np.ndarray:
  return g["runtime"].astype(np.float64) / np.maximum(
      g["normalizer"].astype(np.float64), 1.0)


def calibrate(predictions: dict) -> dict:
  """The smallest margin that earns trust on labelled predictions.

  A margin m qualifies when (a) of the (config, default) pairs the model
  puts more than m ahead of the default, at least `TARGET_PRECISION` are
  measured faster than the default (over at least `MIN_SUPPORT` pairs), and
  (b) the guarded ranking's mean top-1 error is no worse than always taking
  the default. Among qualifying margins, the one with the lowest guarded
  top-1 error wins; ties go to the larger (safer) margin.

  Args:
    predictions: `evaluate.score_records` output of tile graphs: {graph id:
      {"index", "score" (higher = faster), "runtime", "normalizer"}}, the
      default being config index 0.

  Returns:
    {"margin": float or None, "precision", "support", "valid_top1_error",
     "default_top1_error", "graphs"}.
  """
  graphs = []
  for g in predictions.values():
    if 0 not in g["index"] or not np.any(g["runtime"] > 0):
      continue
    pred = -np.asarray(g["score"], np.float64)
    default = int(np.flatnonzero(g["index"] == 0)[0])
    graphs.append((pred, _normalised(g), default))
  result = {"margin": None, "precision": None, "support": 0,
            "graphs": len(graphs), "target_precision": TARGET_PRECISION}
  if not graphs:
    return result
  deltas, faster = [], []
  for pred, rt, d in graphs:
    others = np.arange(len(pred)) != d
    deltas.append((pred[d] - pred)[others])
    faster.append((rt < rt[d])[others])
  deltas, faster = np.concatenate(deltas), np.concatenate(faster)

  def top1(margin):
    return float(np.mean([
        metrics.top_k_error(guarded_keys(p, margin, d), rt, 1)
        for p, rt, d in graphs]))

  result["default_top1_error"] = best_error = top1(None)
  ahead = np.sort(deltas[deltas > 0])[::-1]
  best = None
  # At most ~200 candidate margins: the guarded error is re-scored per one.
  for j in np.unique(np.linspace(MIN_SUPPORT, len(ahead), 200).astype(int)):
    # Margin just below the j-th largest lead: exactly j pairs are ahead.
    m = ahead[j] if j < len(ahead) else 0.0
    sel = deltas > m
    precision = float(np.mean(faster[sel]))
    if precision < TARGET_PRECISION:
      continue
    err = top1(m)
    if err < best_error - 1e-12:
      best, best_error = (float(m), precision, int(sel.sum())), err
  if best is not None:
    result.update(margin=best[0], precision=best[1], support=best[2])
  result["valid_top1_error"] = best_error
  return result


def guarded_metrics(predictions: dict, margin: Optional[float]
                    ) -> tuple[dict, dict]:
  """Tile metrics of the guarded ranking (`evaluate.metrics_of`'s shape):
  (collection means, {graph id: metrics}); graphs without config 0 or
  runtimes are skipped."""
  per_graph = {}
  for gid, g in predictions.items():
    if 0 not in g["index"] or not np.any(g["runtime"] > 0):
      continue
    default = int(np.flatnonzero(g["index"] == 0)[0])
    keys = guarded_keys(-np.asarray(g["score"], np.float64), margin, default)
    per_graph[gid] = metrics.graph_metrics(
        "tile", keys, g["runtime"].astype(np.float64),
        g["normalizer"].astype(np.float64))
  return metrics.collection_metrics("tile", per_graph.values()), per_graph


def margin_of(metadata: dict) -> Optional[float]:
  """The calibrated margin in a model's metadata (None: default first)."""
  guard = metadata.get(METADATA_KEY) or {}
  margin = guard.get("margin")
  return None if margin is None else float(margin)


def has_guard(metadata: dict) -> bool:
  """Whether the model was calibrated (tile models trained by tpurank)."""
  return METADATA_KEY in metadata
