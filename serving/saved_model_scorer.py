"""Scores every config of a graph with an exported SavedModel, in-process.

Configs go to the model in chunks of K (one example each, as conversion
writes them), so a graph with 100k configs never needs them all at once. K
is the most the model's call budget allows (`call_budget`), up to
`options.RANK_K` of its join: a late-join model encodes the graph once per
example, so an example carries as many configs as fit.
"""

from concurrent import futures
from typing import Callable, Optional, Sequence

import numpy as np
import tensorflow as tf

from conversion import examples
from conversion import options
from conversion import prune
from schemas import npz_format
from schemas.errors import fail
from serving import call_budget
from serving import options as serving_options
from trainer import call_cost
from trainer import evaluate
from trainer import export
from trainer import hparams
from trainer import input_fn


def fitting_k(graph: npz_format.Graph, join: str, budget: int,
              most: int) -> int:
  """Configs per example of a (pruned) graph within the call budget."""
  if graph.kind != npz_format.LAYOUT:
    return most
  return int(call_cost.configs_per_example(
      graph.num_nodes, len(graph.node_config_ids), join, budget, most))


def score_graph(score_examples: Callable, graph: npz_format.Graph, gid: str,
                k: Optional[int] = None, batch: Optional[int] = None,
                hops: int = options.DEFAULT_HOPS, join: str = hparams.JOINS[0],
                budget: int = serving_options.MAX_OP_COPIES) -> np.ndarray:
  """Scores every config of a graph through any `score_examples` function.

  Args:
    score_examples: list of serialized examples -> (scores, config_index),
      each [n, K_max]: an in-process SavedModel, a REST or a gRPC client.
    graph: The graph.
    gid: Its id (`<collection>:<stem>`).
    k: Configs per example (request row); None: as many as fit `budget`,
      up to `options.RANK_K[join]`.
    batch: Examples per call; None: `options.RANK_BATCH[join]`.
    hops: Layout pruning, as in training.
    join: The model's layout join (`trainer.hparams.JOINS`).
    budget: Op copies per model call (`call_budget`).

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

  sub = prune.prune(graph, hops)
  if k is None:
    k = fitting_k(sub, join, budget, options.RANK_K[join])
  batch = batch or options.RANK_BATCH[join]
  for ex in examples.graph_examples(sub, gid, k, "test", hops=-1):
    pending.append(ex)
    if len(pending) == batch:
      flush()
  if pending:
    flush()
  return scores


def score_graph_arrays(rank: Callable, graph: npz_format.Graph,
                       chunk: int) -> np.ndarray:
  """Scores every config of a (pruned) graph through a model's plain-tensor
  `rank` signature (`trainer.export`), `chunk` configs per call.

  Args:
    rank: `rank(**arrays) -> {"scores": [configs]}`: the in-process
      signature or a client's `rank`.
    graph: The graph, pruned as the model was trained.
    chunk: Configs per call.

  Returns:
    [num_configs] scores, lower = predicted faster, by config index.
  """
  arrays = {"node_feat": graph.node_feat.astype(np.float32, copy=False),
            "node_opcode": graph.node_opcode.astype(np.int64),
            "edge_index": graph.edge_index.astype(np.int64, copy=False)}
  key = "config_feat"
  if graph.kind == npz_format.LAYOUT:
    arrays["node_config_ids"] = graph.node_config_ids.astype(np.int64)
    key = "node_config_feat"
  parts = []
  # The next chunk is read (and inflated) while the model ranks this one.
  with futures.ThreadPoolExecutor(max_workers=1) as reader:
    blocks = graph.iter_config_feat(chunk)
    ahead = reader.submit(next, blocks, None)
    while (feat := ahead.result()) is not None:
      ahead = reader.submit(next, blocks, None)
      parts.append(np.asarray(rank(**arrays, **{key: feat})["scores"]))
  if not parts:
    return np.zeros(0, np.float64)
  return np.concatenate(parts).astype(np.float64)


class SavedModelScorer:
  """Loads `<model_dir>` (a SavedModel version dir) and ranks graphs.

  Init args:
    model_dir: Directory with saved_model.pb (e.g. OUT/export/1).
    k: Configs per example (None: as many as the budget allows).
    batch: Examples per call of the serving signature (at most; None: by
      the model's join).
    max_op_copies: Op copies per model call (`call_budget`).
  """

  def __init__(self, model_dir: str, k: Optional[int] = None,
               batch: Optional[int] = None,
               max_op_copies: int = serving_options.MAX_OP_COPIES):
    signatures = tf.saved_model.load(model_dir).signatures
    self._fn = signatures["serving_default"]
    # Models exported before the plain-tensor signature have only examples.
    self._rank = signatures.get(export.RANK_SIGNATURE)
    metadata = export.metadata_or_empty(model_dir)
    self.join = export.model_join(metadata)
    self.k, self._budget = k, max_op_copies
    self.batch = batch or options.RANK_BATCH[self.join]
    self.hops = export.pruning_hops(model_dir, metadata)
    # "tile" or "layout" (None for a model without tpurank metadata).
    self.kind = metadata.get("kind")

  def _call(self, serialized: list[bytes]):
    out = self._fn(examples=tf.constant(serialized))
    return out["scores"].numpy(), out["config_index"].numpy()

  def score_examples(self, serialized: list[bytes]):
    """Scores serialized examples: (scores, config_index), [n, K_max] each."""
    return call_budget.score_in_groups(self._call, serialized, self._budget,
                                       self.join)

  def score_graph(self, graph: npz_format.Graph, gid: str,
                  hops: Optional[int] = None) -> np.ndarray:
    """Predicted runtime scores of all configs (lower = faster), by index.

    `hops` defaults to the model's own (see `export.pruning_hops`).
    """
    if self.kind and graph.kind != self.kind:
      # A model of the other kind would answer with meaningless scores.
      raise fail(graph.path, "kind", f"a {self.kind} graph (the model's "
                 "kind)", f"a {graph.kind} graph")
    hops = self.hops if hops is None else hops
    if self._rank is None:
      return score_graph(self.score_examples, graph, gid, self.k, self.batch,
                         hops, self.join, self._budget)
    # Plain tensors: no examples to build, serialize and parse. The
    # signature bounds its own memory; chunks bound the arrays sent.
    sub = prune.prune(graph, hops)
    chunk = self.k or fitting_k(sub, self.join, self._budget,
                                options.RANK_K[self.join])
    return score_graph_arrays(self._rank, sub, chunk)

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
