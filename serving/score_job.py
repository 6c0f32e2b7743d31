"""The `tpurank score` Beam job: whole collections -> submission.csv.

Writes OUT (the CSV, rows sorted by ID), OUT.metrics.jsonl (per-graph
metrics where runtimes exist, sorted by ID), OUT.dead_letters.jsonl and
OUT.summary.json (counts and mean metrics per collection). The default
runner is the DirectRunner in multi-processing mode; other runners via Beam
options (e.g. `--runner DaskRunner --dask_client_address HOST:PORT`).

The pipeline's last step writes the first three and then OUT.counts.json,
what the pipeline itself saw (`batch_score.ScoreLedger`):

    {"counts": {"graphs_in": 9, "graphs_scored": 8, "dead_letters": 1,
                "configs_scored": 812},
     "files": {"<input file>": {"graphs_in": 1, "rows": 1,
                                "dead_letters": 0}, ...}}

`run` reads it after the run and reconciles it with the input files and
the rows and dead letters written (no Beam metrics: not every runner has
them), so the counts are exact on every runner.
"""

import json
from typing import Optional, Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from conversion import convert
from conversion import convert_job
from conversion import graph_files
from conversion import progress
from schemas import npz_format
from schemas.errors import fail
from serving import batch_score
from trainer import export
from trainer import metrics as metrics_lib

COUNTS_SUFFIX = ".counts.json"  # OUT.counts.json, written by the pipeline.


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


def _no_model(element, collection: str) -> dict:
  """The report of a graph file whose collection has no model."""
  path = graph_files.printable(element)
  return batch_score.report(path, graphs_in=1, dead=json.dumps({
      "file": path, "field": "--model",
      "reason": f"{path}: --model: expected a model for {collection} "
                f"({npz_format.collection_kind(collection)}), found none"}))


class _WriteOutputs(beam.DoFn):
  """The merged ledger -> the CSV, metrics, dead letters, then the counts
  file (the pipeline's last step: everything else is upstream of it)."""

  def __init__(self, base: str):
    super().__init__()
    self._base = base

  def process(self, ledger):
    b = self._base
    _write_lines(b, [batch_score.HEADER] + ledger["rows"])
    _write_lines(b + ".metrics.jsonl", map(json.dumps, ledger["metrics"]))
    _write_lines(b + ".dead_letters.jsonl", ledger["dead"])
    _write_lines(b + COUNTS_SUFFIX, [json.dumps(
        {"counts": ledger["counts"], "files": ledger["files"]}, indent=2,
        sort_keys=True)])
    yield b + COUNTS_SUFFIX


def _write_lines(path: str, lines) -> None:
  with FileSystems.create(path) as f:
    f.write("".join(line + "\n" for line in lines).encode())


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
  reports = []
  for c, files in found.items():
    paths = pipeline | f"Files[{c}]" >> beam.Create(
        graph_files.to_elements(files))
    if c not in models:
      # No model of this kind: every graph is a dead letter, counted.
      reports.append(paths | f"NoModel[{c}]" >> beam.Map(_no_model, c))
      continue
    reports.append(paths | f"Score[{c}]" >> batch_score.ScoreCollection(
        c, models[c], options, progress_dir=marks))
  base = out_csv
  # One chain to one last step (the DaskRunner runs only that and its
  # inputs).
  _ = (tuple(reports) | "Reports" >> beam.Flatten()
       | "Ledger" >> beam.CombineGlobally(
           batch_score.ScoreLedger()).without_defaults()
       | "Write" >> beam.ParDo(_WriteOutputs(base)))
  # Graphs with a model: one per .npz; a raw tile .pb holds an unknown
  # number until read (then no total is shown).
  files = [f for c, fs in found.items() if c in models for f in fs]
  total = (None if any(not f.endswith(".npz") for f in files)
           else len(files))
  with progress.watch(marks, total, "scored"):
    convert_job.run_pipeline(pipeline)
  return _summarize(found, models, base)


def reconcile(found: dict, counted: Optional[dict], rows: Optional[int],
              dead: Optional[int]) -> list[str]:
  """Mismatches between the input files, the counts file and the rows and
  dead letters written: every file in the ledger once, each of its graphs
  a row or a dead letter."""
  if counted is None:
    return ["the pipeline wrote no counts file (its last step did not run)"]
  c, ledger = counted["counts"], counted["files"]
  given = {graph_files.printable(e) for fs in found.values()
           for e in graph_files.to_elements(fs)}
  bad = [f"{len(fs)} file(s) {what}, e.g. {sorted(fs)[0]}" for fs, what in (
      (given - set(ledger), "neither scored nor dead-lettered"),
      (set(ledger) - given, "not among the inputs")) if fs]
  bad += [f"{f}: {e['graphs_in']} graphs = {e['rows']} rows + "
          f"{e['dead_letters']} dead letters?" for f, e in sorted(
              ledger.items()) if e["graphs_in"] < 1 or
          e["graphs_in"] != e["rows"] + e["dead_letters"]]
  if rows != c["graphs_scored"] or dead != c["dead_letters"]:
    bad.append(f"{c['graphs_scored']} rows and {c['dead_letters']} dead "
               f"letters counted, {rows} and {dead} written")
  return bad


def _summarize(found, models, base) -> dict:
  counts_text = convert.read_text(base + COUNTS_SUFFIX)
  counted = json.loads(counts_text) if counts_text is not None else None
  counts = (counted["counts"] if counted
            else dict.fromkeys(batch_score.COUNTERS, 0))
  dead = convert.read_jsonl(base + ".dead_letters.jsonl")
  graphs = counts["graphs_in"]
  csv_text = convert.read_text(base)
  rows = len(csv_text.splitlines()) - 1 if csv_text is not None else None
  mismatches = reconcile(found, counted, rows, len(dead))
  rows = rows or 0
  per_graph = convert.read_jsonl(base + ".metrics.jsonl")
  means = {}
  for c in found:
    mine = [m for m in per_graph if m["id"].startswith(c + ":")]
    if mine:
      means[c] = metrics_lib.collection_metrics(
          npz_format.collection_kind(c),
          [{k: v for k, v in m.items() if k != "id"} for m in mine])
  summary = {"graphs": graphs, "rows": rows, "dead_letters": len(dead),
             "counts": counts, "models": models, "metrics": means,
             "reconciled": rows == graphs - len(dead) and not mismatches,
             "mismatches": mismatches}
  with open(base + ".summary.json", "w") as f:
    json.dump(summary, f, indent=2, default=float)
  return summary
