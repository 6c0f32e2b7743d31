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
has runtimes (train/valid splits) its metrics are written too.

The counts come from the pipeline's own outputs, not Beam metrics (the
DaskRunner reports none): every step emits small reports (a graph read, a
row, a dead letter) that `ScoreLedger` merges into one summary, which the
job writes as its last step (`serving/score_job.py`); rows == graphs in -
dead letters must hold. The pipeline keeps to what every runner runs
alike, the DaskRunner included: no tagged DoFn outputs (`_tagged`), no
output left for a bundle's end (the examples reach RunInference already
batched, per graph), one last step.
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
from serving import options as serving_options
from trainer import default_guard
from trainer import export
from trainer import metrics

COUNTERS = ("graphs_in", "graphs_scored", "dead_letters", "configs_scored")
TILE_TOP = 5
HEADER = "ID,TopConfigs"


class SavedModelHandler(inference.ModelHandler):
  """RunInference handler for a tpurank SavedModel's serving signature.

  Used `with_no_batching()`: each element is one batch of (graph id,
  example) pairs of one graph (`_ToExamples`).

  Init args:
    model_dir: The SavedModel version directory.
  """

  def __init__(self, model_dir: str):
    super().__init__()
    self._dir = model_dir
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

  def get_metrics_namespace(self) -> str:
    return "tpurank.RunInference"


@dataclasses.dataclass(frozen=True)
class ScoreOptions:
  """k: configs per example; hops: layout pruning (None: as in training,
  from the model's metadata); default_config: the tile compiler default's
  index, kept first unless the model is confident (`default_guard`; None:
  plain model order)."""
  k: int = conversion_options.EVAL_K
  hops: Optional[int] = None
  # Tile: the compiler default's index for the guard (None: no guard).
  default_config: Optional[int] = serving_options.DEFAULT_CONFIG


def _tagged(tag: str, *value):
  """An output of `_ToExamples`: one PCollection of (tag, ...) tuples, split
  by tag downstream (`_only`). Tagged outputs of a DoFn would be simpler,
  but the DaskRunner hands every output to every consumer."""
  return (tag, *value)


def _only(tag: str):
  """Keeps `_tagged(tag, ...)` outputs, without the tag."""
  return (f"Only[{tag}]" >> beam.Filter(lambda t: t[0] == tag)
          | f"Untag[{tag}]" >> beam.Map(
              lambda t: t[1] if len(t) == 2 else t[1:]))


def report(path: str, graphs_in: int = 0, dead: Optional[str] = None,
           **row) -> dict:
  """One small record for the job's ledger (`ScoreLedger`): a graph read,
  a dead letter, or a scored graph's row (id, row, configs, metrics)."""
  return {"file": path, "graphs_in": graphs_in, "dead": dead, **row}


class _ToExamples(beam.DoFn):
  """A graph file (.npz or raw .pb) -> for each of its graphs: its info
  (keyed by graph id), its examples of all configs in batches of up to
  `batch_size` (one model call each), and a report; or a dead letter."""

  def __init__(self, collection: str, options: ScoreOptions,
               batch_size: int, progress_dir: Optional[str] = None):
    super().__init__()
    self._collection, self._options = collection, options
    self._batch_size, self._progress = batch_size, progress_dir

  def _dead(self, element, path: str, record: str):
    if self._progress:  # Done: it will not reach _Assemble.
      progress.mark_done(self._progress, element)
    return _tagged("report", report(path, graphs_in=1, dead=record))

  def process(self, element):
    path = graph_files.printable(element)
    with contextlib.ExitStack() as stack:
      try:
        path = graph_files.from_element(element)
        opened = stack.enter_context(graph_files.open_graphs(
            path, self._collection))
      except Exception as e:  # pylint: disable=broad-except  (dead letter)
        yield self._dead(element, path, convert.dead_letter(path, e))
        return
      for skipped in opened.skipped:
        yield self._dead(f"{path}: {skipped}", path,
                         convert.dead_letter(path, skipped))
      for gid, graph in opened.graphs:
        info = {"path": path, "kind": graph.kind,
                "num_configs": graph.num_configs,
                "runtime": (graph.config_runtime.tolist()
                            if graph.has_runtimes else None),
                "normalizer": (graph.config_runtime_normalizers.tolist()
                               if graph.kind == "tile" else None)}
        yield _tagged("report", report(path, graphs_in=1))
        yield _tagged("graph", gid, info)
        # Batched here, within one graph: RunInference's own batching
        # emits a bundle's last batch when the bundle finishes, which the
        # DaskRunner drops.
        batch = []
        for ex in examples.graph_examples(graph, gid, self._options.k,
                                          "test", self._options.hops):
          batch.append((gid, ex))
          if len(batch) == self._batch_size:
            yield _tagged("batch", batch)
            batch = []
        if batch:
          yield _tagged("batch", batch)


class _Assemble(beam.DoFn):
  """All scores of one graph -> its submission row and metrics."""

  def __init__(self, progress_dir: Optional[str] = None,
               guard: Optional[tuple] = None):
    """`guard`: (default config index, margin) of a tile model, or None."""
    super().__init__()
    self._progress = progress_dir
    self._guard = guard

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
      yield report(info["path"], dead=json.dumps({
          "file": info["path"], "field": "scores",
          "reason": f"{info['path']}: scores: expected one per config "
                    f"({n}), found {len(index)}"}))
      return
    full = np.empty(n)
    full[index.astype(np.int64)] = scores
    keys = full
    if info["kind"] == "tile" and self._guard and self._guard[0] < n:
      keys = default_guard.guarded_keys(full, self._guard[1], self._guard[0])
    order = np.argsort(keys, kind="stable")
    if info["kind"] == "tile":
      order = order[:TILE_TOP]
    m = None
    if info["runtime"] is not None:
      norm = (np.asarray(info["normalizer"], np.float64)
              if info["normalizer"] is not None else None)
      m = {k: float(v) for k, v in metrics.graph_metrics(
          info["kind"], keys, np.asarray(info["runtime"], np.float64),
          norm).items()}
    yield report(info["path"], id=gid,
                 row=f"{gid},{';'.join(map(str, order))}", configs=n,
                 metrics=m)


@beam.ptransform_fn
def ScoreCollection(files, collection: str, model_dir: str,  # pylint: disable=invalid-name
                    options: ScoreOptions, batch_size: int = 8,
                    progress_dir: Optional[str] = None):
  """PCollection of graph paths -> reports (`report`): per graph one read,
  then its row (and metrics) or a dead letter.

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
  metadata = export.metadata_or_empty(model_dir)
  guard = ((options.default_config, default_guard.margin_of(metadata))
           if options.default_config is not None and
           default_guard.has_guard(metadata) else None)
  read = (files
          | "Reshuffle" >> beam.Reshuffle()
          | "ToExamples" >> beam.ParDo(_ToExamples(collection, options,
                                                   batch_size, progress_dir)))
  scored = (read
            | "Batches" >> _only("batch")
            | "RunInference" >> inference.RunInference(
                inference.KeyedModelHandler(SavedModelHandler(model_dir))
                .with_no_batching())
            | "Inference" >> beam.MapTuple(lambda gid, r: (gid, r.inference)))
  graphs = read | "Graphs" >> _only("graph")
  rows = ({"graphs": graphs, "scores": scored}
          | "Group" >> beam.CoGroupByKey()
          | "Assemble" >> beam.ParDo(_Assemble(progress_dir, guard)))
  return ((read | "Reports" >> _only("report"), rows)
          | "AllReports" >> beam.Flatten())


class ScoreLedger(beam.CombineFn):
  """Reports -> the job's summary: its rows, per-graph metrics and dead
  letters (sorted), per input file what became of it, and the counts
  (COUNTERS)."""

  def create_accumulator(self):
    return {"rows": [], "metrics": [], "dead": [], "files": {}}

  def add_input(self, acc, r):
    entry = acc["files"].setdefault(r["file"], {"graphs_in": 0, "rows": 0,
                                                "dead_letters": 0})
    entry["graphs_in"] += r["graphs_in"]
    if r["dead"] is not None:
      entry["dead_letters"] += 1
      acc["dead"].append(r["dead"])
    if "row" in r:
      entry["rows"] += 1
      acc["rows"].append((r["id"], r["row"], r["configs"]))
      if r["metrics"] is not None:
        acc["metrics"].append({"id": r["id"], **r["metrics"]})
    return acc

  def merge_accumulators(self, accumulators):
    out = self.create_accumulator()
    for acc in accumulators:
      for key in ("rows", "metrics", "dead"):
        out[key] += acc[key]
      for f, e in acc["files"].items():
        mine = out["files"].setdefault(f, dict.fromkeys(e, 0))
        for k, v in e.items():
          mine[k] += v
    return out

  def extract_output(self, acc):
    rows = sorted(acc["rows"])
    dead = sorted(acc["dead"])
    return {
        "rows": [r for _, r, _ in rows],
        "metrics": sorted(acc["metrics"], key=lambda m: m["id"]),
        "dead": dead, "files": acc["files"],
        "counts": {"graphs_in": sum(e["graphs_in"]
                                    for e in acc["files"].values()),
                   "graphs_scored": len(rows), "dead_letters": len(dead),
                   "configs_scored": sum(n for _, _, n in rows)}}
