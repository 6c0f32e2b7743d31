"""Scores every config of a graph with an exported SavedModel, in-process.

Configs go to the model in chunks of K (one example each, as conversion
writes them), so a graph with 100k configs never needs them all at once.
"""

import numpy as np
import tensorflow as tf

from pipeline import examples
from schemas import npz_format


class SavedModelScorer:
  """Loads `<model_dir>` (a SavedModel version dir) and ranks graphs.

  Init args:
    model_dir: Directory with saved_model.pb (e.g. OUT/export/1).
    k: Configs per request.
    batch: Examples per call of the serving signature.
  """

  def __init__(self, model_dir: str, k: int = 64, batch: int = 4):
    self._fn = tf.saved_model.load(model_dir).signatures["serving_default"]
    self.k, self.batch = k, batch

  def score_examples(self, serialized: list[bytes]):
    """Scores serialized examples: (scores, config_index), [n, K_max] each."""
    out = self._fn(examples=tf.constant(serialized))
    return out["scores"].numpy(), out["config_index"].numpy()

  def score_graph(self, graph: npz_format.Graph, gid: str,
                  hops: int = 2) -> np.ndarray:
    """Predicted runtime scores of all configs (lower = faster), by index."""
    scores = np.full(graph.num_configs, np.nan, dtype=np.float64)
    pending = []

    def flush():
      s, idx = self.score_examples(pending)
      real = idx >= 0
      scores[idx[real]] = s[real]
      pending.clear()

    for ex in examples.graph_examples(graph, gid, self.k, "test", hops):
      pending.append(ex)
      if len(pending) == self.batch:
        flush()
    if pending:
      flush()
    return scores
