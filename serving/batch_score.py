"""Batch scoring with Beam RunInference: graph directories -> a Kaggle CSV.

For each collection: graph files -> examples of every config (chunks of K,
keyed by graph id) -> `RunInference` with the exported SavedModel (keyed) ->
scores regrouped per graph -> one submission row per graph, best config
first:

    ID,TopConfigs
    tile:xla:<stem>,<5 best config indices>
    layout:xla:random:<stem>,<every config index, best first, ';'-separated>

A graph that cannot be read, has no model of its kind, or does not get a
score for every config becomes a dead letter with the reason. Where a graph
has runtimes (train/valid splits) its metrics are written too. Counters
reconcile: rows == graphs in - dead letters.
"""

import contextlib
import dataclasses
import json
from typing import Iterable, Optional, Sequence

import apache_beam as beam
from apache_beam.ml.inference import base as inference
import numpy as np
import tensorflow as tf

from conversion import convert
from conversion import examples
from conversion import graph_files
from conversion import options as conversion_options
from conversion import progress
from serving import call_budget
from trainer import export
from trainer import metrics

NAMESPACE = "tpurank.score"
COUNTERS = ("graphs_in", "graphs_scored", "dead_letters", "configs_scored")
TILE_TOP = 5
HEADER = "ID,TopConfigs"


class SavedModelHandler(inference.ModelHandler):
  """RunInference handler for a tpurank SavedModel's serving signature.

  Init args:
    model_dir: The SavedModel version directory.
    max_batch_size: Examples per signature call.
  """

  def __init__(self, model_dir: str, max_batch_size: int = 8):
    super().__init__()
    self._dir, self._max = model_dir, max_batch_size
    self._join = export.model_join(export.metadata_or_empty(model_dir))

  def load_model(self):
    return tf.saved_model.load(self._dir).signatures["serving_default"]

  def run_inference(self, batch: Sequence[bytes], model,
                    inference_args: Optional[dict] = None
                    ) -> Iterable[inference.PredictionResult]:

    def call(group):
      out = model(examples=tf.constant(group, dtype=tf.string))
      return out["scores"].numpy(), out["config_index"].numpy()

    # Within the op-copy budget: large layout graphs split the batch.
    scores, index = call_budget.score_in_groups(
        call, batch, join=self._join)
    for s, i in zip(scores, index):
      real = i >= 0
      # The example bytes are not carried on: graphs can be large.
      yield inference.PredictionResult(None, (i[real], s[real]))

  def get_num_bytes(self, batch: Sequence[bytes]) -> int:
    return sum(len(b) for b in batch)

  def batch_elements_kwargs(self):
    return {"min_batch_size": 1, "max_batch_size": self._max}

  def get_metrics_namespace(self) -> str:
    return "tpurank.RunInference"


@dataclasses.dataclass(frozen=True)
class ScoreOptions:
  """k: configs per example; hops: layout pruning (None: as in training,
  from the model's metadata)."""
  k: int = conversion_options.EVAL_K
  hops: Optional[int] = None


def _counters():
  return {n: beam.metrics.Metrics.counter(NAMESPACE, n) for n in COUNTERS}


class _ToExamples(beam.DoFn):
  """A graph file (.npz or raw .pb) -> (gid, example) of all configs of
  each of its graphs and their info; or a dead letter."""

  def __init__(self, collection: str, options: ScoreOptions,
               progress_dir: Optional[str] = None):
    super().__init__()
    self._collection, self._options = collection, options
    self._progress = progress_dir
    self._c = _counters()

  def _dead(self, element, record: str):
    if self._progress:  # Done: it will not reach _Assemble.
      progress.mark_done(self._progress, element)
    return beam.pvalue.TaggedOutput("dead", record)

  def process(self, element):
    path = graph_files.printable(element)
    with contextlib.ExitStack() as stack:
      try:
        path = graph_files.from_element(element)
        opened = stack.enter_context(graph_files.open_graphs(
            path, self._collection))
      except Exception as e:  # pylint: disable=broad-except  (dead letter)
        self._c["graphs_in"].inc()
        self._c["dead_letters"].inc()
        yield self._dead(element, convert.dead_letter(path, e))
        return
      for skipped in opened.skipped:
        self._c["graphs_in"].inc()
        self._c["dead_letters"].inc()
        yield self._dead(f"{path}: {skipped}",
                         convert.dead_letter(path, skipped))
      for gid, graph in opened.graphs:
        self._c["graphs_in"].inc()
        info = {"path": path, "kind": graph.kind,
                "num_configs": graph.num_configs,
                "runtime": (graph.config_runtime.tolist()
                            if graph.has_runtimes else None),
                "normalizer": (graph.config_runtime_normalizers.tolist()
                               if graph.kind == "tile" else None)}
        yield beam.pvalue.TaggedOutput("graphs", (gid, info))
        for ex in examples.graph_examples(graph, gid, self._options.k,
                                          "test", self._options.hops):
          yield gid, ex


class _Assemble(beam.DoFn):
  """All scores of one graph -> its submission row and metrics."""

  def __init__(self, progress_dir: Optional[str] = None):
    super().__init__()
    self._progress = progress_dir
    self._c = _counters()

  def process(self, element):
    return progress.marking(self._progress, element[0],
                            self._assemble(element))

  def _assemble(self, element):
    gid, grouped = element
    (info,) = grouped["graphs"]
    parts = list(grouped["scores"])
    n = info["num_configs"]
    index = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0)
    scores = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0)
    if len(index) != n or not np.array_equal(np.sort(index), np.arange(n)):
      self._c["dead_letters"].inc()
      yield beam.pvalue.TaggedOutput("dead", json.dumps({
          "file": info["path"], "field": "scores",
          "reason": f"{info['path']}: scores: expected one per config "
                    f"({n}), found {len(index)}"}))
      return
    full = np.empty(n)
    full[index.astype(np.int64)] = scores
    order = np.argsort(full, kind="stable")
    if info["kind"] == "tile":
      order = order[:TILE_TOP]
    self._c["graphs_scored"].inc()
    self._c["configs_scored"].inc(n)
    yield f"{gid},{';'.join(map(str, order))}"
    if info["runtime"] is not None:
      norm = (np.asarray(info["normalizer"], np.float64)
              if info["normalizer"] is not None else None)
      m = metrics.graph_metrics(info["kind"], full,
                                np.asarray(info["runtime"], np.float64), norm)
      yield beam.pvalue.TaggedOutput("metrics", json.dumps(
          {"id": gid, **{k: float(v) for k, v in m.items()}}))


@beam.ptransform_fn
def ScoreCollection(files, collection: str, model_dir: str,  # pylint: disable=invalid-name
                    options: ScoreOptions, batch_size: int = 8,
                    progress_dir: Optional[str] = None):
  """PCollection of graph paths -> {rows, metrics, dead}.

  Args:
    files: Graph file paths of one collection.
    collection: Its name (ids and kind).
    model_dir: SavedModel of the matching kind.
    options: ScoreOptions.
    batch_size: Examples per model call.
    progress_dir: Where workers mark each graph done (`progress`), if set.
  """
  if options.hops is None:
    options = dataclasses.replace(options,
                                  hops=export.pruning_hops(model_dir))
  read = (files
          | "Reshuffle" >> beam.Reshuffle()
          | "ToExamples" >> beam.ParDo(_ToExamples(collection, options,
                                                   progress_dir))
          .with_outputs("graphs", "dead", main="examples"))
  scored = (read.examples
            | "RunInference" >> inference.RunInference(
                inference.KeyedModelHandler(
                    SavedModelHandler(model_dir, batch_size)))
            | "Inference" >> beam.MapTuple(lambda gid, r: (gid, r.inference)))
  out = ({"graphs": read.graphs, "scores": scored}
         | "Group" >> beam.CoGroupByKey()
         | "Assemble" >> beam.ParDo(_Assemble(progress_dir)).with_outputs(
             "metrics", "dead", main="rows"))
  dead = ((read.dead, out.dead) | "Dead" >> beam.Flatten())
  return {"rows": out.rows, "metrics": out.metrics, "dead": dead}
