"""The benchmark plots (matplotlib, PNG)."""

import os

import matplotlib
matplotlib.use("Agg")  # Files only; no display on CI machines.
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
import numpy as np

from schemas import npz_format

_STAGE_LABELS = {"convert": "convert (all configs)",
                 "train": "train step", "score": "score (all configs)"}


def _save(fig, path: str) -> str:
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path


def scaling_plot(points: list, axis: str, path: str) -> str:
  """Time and peak RSS of each stage vs `axis` ("nodes" or "configs"),
  log-log, with a linear-growth guide through each time curve's first
  point (a curve steeper than its guide grows faster than linearly)."""
  fig, (t_ax, m_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
  xs = np.array([p[axis] for p in points], dtype=float)
  for stage, label in _STAGE_LABELS.items():
    ts = np.array([p[stage]["seconds"] for p in points])
    line, = t_ax.plot(xs, ts, "o-", label=label)
    t_ax.plot(xs, ts[0] * xs / xs[0], ":", color=line.get_color(), lw=1)
    m_ax.plot(xs, [p[stage]["peak_rss_mb"] for p in points], "o-",
              label=label)
  for ax, ylabel in ((t_ax, "seconds (dotted: linear growth)"),
                     (m_ax, "peak RSS (MB)")):
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"graph {axis}")
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
  fixed = "configs" if axis == "nodes" else "nodes"
  fig.suptitle(f"Scaling vs {axis} ({fixed} fixed at {points[0][fixed]}; "
               "simulated layout graphs)")
  return _save(fig, path)


def quality_plot(results: dict, path: str) -> str:
  """Per collection (columns): the primary metric (top row) and the top-1
  error (bottom row, where the compiler default has a value too) of each
  model, mean and std over seeds (bars), beside the references."""
  names = list(results)
  fig, axes = plt.subplots(2, len(names), figsize=(3.2 * len(names), 7.2),
                           squeeze=False)
  for col, collection in enumerate(names):
    r = results[collection]
    primary = ("top5_error" if npz_format.collection_kind(collection) ==
               "tile" else "kendall_tau")
    for row, metric in enumerate((primary, "top1_error")):
      ax = axes[row][col]
      labels, means, stds, colors = [], [], [], []
      for i, (model, runs) in enumerate(r["runs"].items()):
        values = [run["valid_metrics"].get(metric) for run in runs]
        values = [v for v in values if v is not None]
        labels.append(model)
        means.append(np.mean(values) if values else np.nan)
        stds.append(np.std(values) if values else 0)
        colors.append(f"C{i}")
      for name, m in r["reference"].items():
        if m.get(metric) is not None:
          labels.append(name.split(" (")[0])
          means.append(m[metric])
          stds.append(0)
          colors.append("C3" if name.startswith("compiler default")
                        else "C7")
      ax.bar(range(len(labels)), means, yerr=stds, capsize=3, color=colors)
      ax.set_xticks(range(len(labels)))
      ax.set_xticklabels(labels, rotation=40, ha="right", fontsize=8)
      ax.set_title(collection, fontsize=9)
      ax.set_ylabel(metric + (" (lower is better)" if "error" in metric
                              else " (higher is better)"), fontsize=8)
      if metric == "top1_error":
        ax.set_yscale("symlog", linthresh=0.01)
  fig.suptitle("Quality on simulated data (mean ± std over seeds); red: "
               "the compiler's default config")
  return _save(fig, path)


def serving_plot(rows: list, path: str) -> str:
  """Ranking latency p50 (p99 as error bar) vs concurrent clients."""
  fig, ax = plt.subplots(figsize=(6, 4))
  for name in dict.fromkeys(r["path"] for r in rows):
    mine = [r for r in rows if r["path"] == name]
    xs = [r["clients"] for r in mine]
    p50 = np.array([r["p50_ms"] for r in mine]) / 1000
    p99 = np.array([r["p99_ms"] for r in mine]) / 1000
    ax.errorbar(xs, p50, yerr=[np.zeros_like(p50), p99 - p50], fmt="o-",
                capsize=3, label=name)
  ax.set_xscale("log", base=2)
  ax.set_xlabel("concurrent clients")
  ax.set_ylabel("seconds per ranking (p50, bar to p99)")
  ax.grid(True, alpha=0.3)
  ax.legend(fontsize=8)
  return _save(fig, path)
