"""Scores every config of a graph with an exported SavedModel, in-process.

Configs go to the model in chunks of K (one example each, as conversion
writes them), so a graph with 100k configs never needs them all at once; a
call's examples are further grouped within an op-copy budget
(`call_budget`), so large graphs do not multiply the memory either.
"""

from typing import Callable, Optional, Sequence

import numpy as np
import tensorflow as tf

from conversion import examples
from conversion import options
from schemas import npz_format
from schemas.errors import fail
from serving import call_budget
from serving import options as serving_options
from trainer import evaluate
from trainer import export
from trainer import input_fn


def score_graph(score_examples: Callable, graph: npz_format.Graph, gid: str,
                k: int = options.RANK_K, batch: int = options.RANK_BATCH,
                hops: int = options.DEFAULT_HOPS) -> np.ndarray:
  """Scores every config of a graph through any `score_examples` function.

  Args:
    score_examples: list of serialized examples -> (scores, config_index),
      each [n, K_max]: an in-process SavedModel, a REST or a gRPC client.
    graph: The graph.
    gid: Its id (`<collection>:<stem>`).
    k: Configs per example (request row).
    batch: Examples per call.
    hops: Layout pruning, as in training.

  Returns:
    [num_configs] scores, lower = predicted faster, by config index.
  """
  scores = np.full(graph.num_configs, np.nan, dtype=np.float64)
  pending = []

  def flush():
    s, idx = score_examples(pending)
    real = idx >= 0
    scores[idx[real]] = s[real]
    pending.clear()

  for ex in examples.graph_examples(graph, gid, k, "test", hops):
    pending.append(ex)
    if len(pending) == batch:
      flush()
  if pending:
    flush()
  return scores


class SavedModelScorer:
  """Loads `<model_dir>` (a SavedModel version dir) and ranks graphs.

  Init args:
    model_dir: Directory with saved_model.pb (e.g. OUT/export/1).
    k: Configs per request.
    batch: Examples per call of the serving signature (at most).
    max_op_copies: Op copies per model call (`call_budget`).
  """

  def __init__(self, model_dir: str, k: int = options.RANK_K,
               batch: int = options.RANK_BATCH,
               max_op_copies: int = serving_options.MAX_OP_COPIES):
    self._fn = tf.saved_model.load(model_dir).signatures["serving_default"]
    self.k, self.batch, self._budget = k, batch, max_op_copies
    metadata = export.metadata_or_empty(model_dir)
    self.hops = export.pruning_hops(model_dir, metadata)
    # "tile" or "layout" (None for a model without tpurank metadata).
    self.kind = metadata.get("kind")

  def _call(self, serialized: list[bytes]):
    out = self._fn(examples=tf.constant(serialized))
    return out["scores"].numpy(), out["config_index"].numpy()

  def score_examples(self, serialized: list[bytes]):
    """Scores serialized examples: (scores, config_index), [n, K_max] each."""
    return call_budget.score_in_groups(self._call, serialized, self._budget)

  def score_graph(self, graph: npz_format.Graph, gid: str,
                  hops: Optional[int] = None) -> np.ndarray:
    """Predicted runtime scores of all configs (lower = faster), by index.

    `hops` defaults to the model's own (see `export.pruning_hops`).
    """
    if self.kind and graph.kind != self.kind:
      # A model of the other kind would answer with meaningless scores.
      raise fail(graph.path, "kind", f"a {self.kind} graph (the model's "
                 "kind)", f"a {graph.kind} graph")
    return score_graph(self.score_examples, graph, gid, self.k, self.batch,
                       self.hops if hops is None else hops)

  def score_records(self, kind: str, files: Sequence[str]) -> dict:
    """Scores every config in GraphTensor record files, grouped by graph.

    Args:
      kind: "tile" or "layout".
      files: TFRecord files (GZIP or plain) as conversion writes them.

    Returns:
      {graph_id: {"index", "score", "runtime", "normalizer"}} sorted by
      index, with score = higher is predicted faster (as
      `trainer.evaluate.metrics_of` expects).
    """
    def score_batch(serialized):
      scores, index = self.score_examples(list(serialized.numpy()))
      graph = input_fn.parse_batch(kind, serialized)
      config = graph.node_sets["config"]
      sizes = config.sizes.numpy()
      runtime = config["runtime"].numpy()
      normalizer = (config["normalizer"].numpy() if kind == "tile" else
                    np.ones_like(runtime))
      gids = np.repeat(graph.context["graph_id"].numpy().reshape(-1), sizes)
      # Signature rows are padded to the longest example: keep real slots.
      real = np.arange(index.shape[1])[None, :] < sizes[:, None]
      return gids, index[real], -scores[real], runtime, normalizer

    return evaluate.score_records(files, self.batch, score_batch)
