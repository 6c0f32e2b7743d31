"""The `tpurank score` Beam job: whole collections -> submission.csv.

Writes OUT (the CSV, rows sorted by ID), OUT.metrics.jsonl (per-graph
metrics where runtimes exist), OUT.dead_letters.jsonl and OUT.summary.json
(counts and mean metrics per collection). The default runner is the
DirectRunner in multi-processing mode; other runners via Beam options.
"""

import json
from typing import Optional, Sequence

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter

from conversion import convert_job
from conversion import graph_files
from conversion import progress
from schemas import npz_format
from schemas.errors import fail
from serving import batch_score
from trainer import export
from trainer import metrics as metrics_lib


def model_kind(model_dir: str) -> dict:
  """The kind and collection a SavedModel was trained for (its metadata)."""
  try:
    meta = export.read_metadata(model_dir)
  except Exception as e:  # pylint: disable=broad-except
    raise fail(model_dir, "assets.extra/tpurank_model.json",
               "tpurank model metadata", f"none ({type(e).__name__})") from e
  return {"kind": meta["kind"], "collection": meta.get("collection")}


def pick_models(model_dirs: Sequence[str], collections: Sequence[str]
                ) -> dict:
  """{collection: model dir}: a model of the same collection, else of the
  same kind; collections without one are left out."""
  metas = [(d, model_kind(d)) for d in model_dirs]
  picked = {}
  for c in collections:
    kind = npz_format.collection_kind(c)
    same = [d for d, m in metas if m["collection"] == c]
    kind_match = [d for d, m in metas if m["kind"] == kind]
    if same or kind_match:
      picked[c] = (same or kind_match)[0]
  return picked


def find_collections(data_dir: str, split: str) -> dict:
  """{collection: files} of every collection with files in `split`."""
  return {c: files for c in npz_format.COLLECTIONS
          if (files := graph_files.split_files(data_dir, c, split))}


def _no_model(path: str, collection: str) -> str:
  """The dead letter of a graph whose collection has no model."""
  return json.dumps({
      "file": path, "field": "--model",
      "reason": f"{path}: --model: expected a model for {collection} "
                f"({npz_format.collection_kind(collection)}), found none"})


def run(model_dirs: Sequence[str], data_dir: str, out_csv: str,
        collection: Optional[str] = None, split: str = "test",
        beam_args: Sequence[str] = (),
        options: batch_score.ScoreOptions = batch_score.ScoreOptions()
        ) -> dict:
  """Scores every graph; returns (and writes) the summary."""
  found = find_collections(data_dir, split)
  if collection:
    found = {c: f for c, f in found.items() if c == collection}
  if not found:
    wanted = collection or "any collection"
    raise fail(data_dir, "directory",
               f"npz (or raw pb) files of {wanted} in the {split} split",
               "none")
  models = pick_models(model_dirs, list(found))
  pipeline = beam.Pipeline(options=convert_job.pipeline_options(beam_args))
  marks = out_csv + progress.PROGRESS_DIR
  rows, metrics, dead = [], [], []
  for c, files in found.items():
    paths = pipeline | f"Files[{c}]" >> beam.Create(
        graph_files.to_elements(files))
    if c not in models:
      # No model of this kind: every graph is a dead letter, counted.
      dead.append(paths | f"NoModel[{c}]" >> beam.Map(
          lambda e, c=c: _no_model(graph_files.printable(e), c)))
      continue
    out = paths | f"Score[{c}]" >> batch_score.ScoreCollection(
        c, models[c], options, progress_dir=marks)
    rows.append(out["rows"])
    metrics.append(out["metrics"])
    dead.append(out["dead"])
  base = out_csv
  _ = (tuple(rows) | "Rows" >> beam.Flatten()
       | "AllRows" >> beam.combiners.ToList()
       | "Sort" >> beam.FlatMap(sorted)
       | "WriteCsv" >> beam.io.WriteToText(base, shard_name_template="",
                                           header=batch_score.HEADER))
  _ = (tuple(metrics) | "Metrics" >> beam.Flatten()
       | "WriteMetrics" >> beam.io.WriteToText(
           base + ".metrics", file_name_suffix=".jsonl",
           shard_name_template=""))
  _ = (tuple(dead) | "AllDead" >> beam.Flatten()
       | "WriteDead" >> beam.io.WriteToText(
           base + ".dead_letters", file_name_suffix=".jsonl",
           shard_name_template=""))
  # Graphs with a model: one per .npz; a raw tile .pb holds an unknown
  # number until read (then no total is shown).
  files = [f for c, fs in found.items() if c in models for f in fs]
  total = (None if any(not f.endswith(".npz") for f in files)
           else len(files))
  with progress.watch(marks, total, "scored"):
    result = pipeline.run()
    result.wait_until_finish()
  return _summarize(result, found, models, base)


def _summarize(result, found, models, base) -> dict:
  counts = dict.fromkeys(batch_score.COUNTERS, 0)
  for c in result.metrics().query(MetricsFilter().with_namespace(
      batch_score.NAMESPACE))["counters"]:
    counts[c.key.metric.name] += int(c.committed or c.attempted or 0)
  dead = convert_job.read_jsonl(base + ".dead_letters.jsonl")
  no_model = sum(1 for d in dead if d["field"] == "--model")
  graphs = counts["graphs_in"] + no_model
  with open(base) as f:
    rows = sum(1 for _ in f) - 1
  per_graph = convert_job.read_jsonl(base + ".metrics.jsonl")
  means = {}
  for c in found:
    mine = [m for m in per_graph if m["id"].startswith(c + ":")]
    if mine:
      means[c] = metrics_lib.collection_metrics(
          npz_format.collection_kind(c),
          [{k: v for k, v in m.items() if k != "id"} for m in mine])
  summary = {"graphs": graphs, "rows": rows, "dead_letters": len(dead),
             "counters": counts, "models": models, "metrics": means,
             "reconciled": rows == graphs - len(dead)}
  with open(base + ".summary.json", "w") as f:
    json.dump(summary, f, indent=2, default=float)
  return summary
