"""Beam conversion: TpuGraphs graph files -> serialized GraphTensor examples.

`ConvertSplits` is the PTransform that the `tpurank convert` job and the TFX
ExampleGen share. Each graph file becomes examples (`conversion/examples.py`:
a train graph one, holding its sampled configs; a valid/test graph one per
chunk of configs); a file that cannot be read or fails validation
becomes a dead-letter record (JSON: file, field, reason) instead. Files are
`.npz` (one graph) or raw tuning `.pb` (one graph, or one per tile
kernel); an unreadable file counts as one graph, in dead letters.

Counts and dead letters come from the pipeline's own outputs, never from
Beam metrics (which not every runner reports: the DaskRunner has none):

1. A worker converts one graph file and writes its examples to a shard of
   its own under `Outputs.temp` (examples stream to disk, nothing large
   travels between workers), then emits one small report: the file's
   counts, its shard, its dead letters.
2. `_Ledger` (a CombineFn, `CombineGlobally`) merges the reports of all
   splits into one summary.
3. The pipeline's last step (`_Finalize`) names the shards
   `<prefix>-SSSSS-of-NNNNN<suffix>` in the order of their input files
   (the output is the same on every runner), writes each split's dead
   letters, removes `Outputs.temp` and then writes the summary, the counts
   file (`Outputs.summary`):

    {"splits": {"train": {
        "counts": {"files_in": 13, "graphs_in": 13, "graphs_converted": 6,
                   "dead_letters": 7, "examples": 40, "configs": 310,
                   "configs_merged": 2},
        "files": {"<input file>": {"graphs_in": 1, "graphs_converted": 1,
                                   "dead_letters": 0, "examples": 7,
                                   "configs": 50, "configs_merged": 0,
                                   "shard": "<its output shard>",
                                   "dead": []}, ...},
        "dead_letters_file": "<path>" or null}, ...}}

   `files` is a ledger: every input file with what became of it (a
   dead-lettered one has "shard": null and its records in "dead").

The launcher reads the counts file after the run and checks it against
its own list of inputs (`reconcile`). The pipeline is one chain that ends
in `_Finalize`, with no side inputs and no multi-output DoFns, so it runs
the same on every runner, the DaskRunner included (which computes only a
pipeline's last transform and its inputs, and does not keep a DoFn's
tagged outputs apart).
"""

import contextlib
import copy
import dataclasses
import json
import os
import uuid
from typing import Optional

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from conversion import examples
from conversion import graph_files
from conversion import options
from conversion import progress
from conversion.options import ConvertOptions
from schemas import npz_format
from schemas.errors import InputError

COUNTERS = ("files_in", "graphs_in", "graphs_converted", "dead_letters",
            "examples", "configs", "configs_merged")
# Per-file fields of the ledger (COUNTERS but files_in: one file each).
_FILE_COUNTS = COUNTERS[1:]


def dead_letter(path: str, error: Exception) -> str:
  """The JSON dead-letter record of a file that could not be converted."""
  if isinstance(error, InputError):
    field, reason = error.problem.field, str(error)
  else:
    field = "file"
    reason = f"{path}: file: {type(error).__name__}: {error}"
  return json.dumps({"file": path, "field": field, "reason": reason})


@dataclasses.dataclass(frozen=True)
class Outputs:
  """Where a conversion writes; `{split}` in a path is the split's name.

  Attributes:
    examples: Shard prefix, e.g. "OUT/{split}/examples".
    suffix: Shard suffix, e.g. ".tfrecord.gz" (always GZIP TFRecords).
    dead_letters: JSON-lines file of a split's dead letters ("": none are
      written; they stay in the counts file's ledger).
    summary: The counts file the pipeline writes last.
    temp: Directory of the workers' unnamed shards (removed at the end).
  """
  examples: str
  suffix: str
  dead_letters: str
  summary: str
  temp: str

  def prefix(self, split: str) -> str:
    # Not str.format: a path may hold braces of its own.
    return self.examples.replace("{split}", split)

  def shard(self, split: str, index: int, total: int) -> str:
    return f"{self.prefix(split)}-{index:05d}-of-{total:05d}{self.suffix}"

  def dead_letters_file(self, split: str) -> Optional[str]:
    return (self.dead_letters.replace("{split}", split)
            if self.dead_letters else None)


def _write_records(path: str, records) -> int:
  """Writes `records` (bytes) to a GZIP TFRecord file; returns how many."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.io.gfile.makedirs(os.path.dirname(path))
  n = 0
  with tf.io.TFRecordWriter(path, options="GZIP") as writer:
    for record in records:
      writer.write(record)
      n += 1
  return n


class _GraphToShard(beam.DoFn):
  """One graph file -> its examples in a shard of its own, and a report."""

  def __init__(self, collection: str, split: str, options: ConvertOptions,
               temp_dir: str, progress_dir: Optional[str] = None):
    super().__init__()
    self._collection, self._split, self._options = collection, split, options
    self._temp, self._progress = temp_dir, progress_dir

  def process(self, element):
    return progress.marking(self._progress, element, [self._convert(element)])

  def _convert(self, element) -> dict:
    o = self._options
    k = (options.train_k(npz_format.collection_kind(self._collection), o.k)
         if self._split == examples.TRAIN else o.eval_k)
    path = graph_files.printable(element)
    report = {"split": self._split, "file": path, "shard": None, "dead": [],
              **dict.fromkeys(_FILE_COUNTS, 0)}

    def dead(error):
      report["graphs_in"] += 1
      report["dead_letters"] += 1
      report["dead"].append(dead_letter(path, error))

    with contextlib.ExitStack() as stack:
      try:
        path = graph_files.from_element(element)
        # Everything is read and validated before the first example leaves.
        opened = stack.enter_context(graph_files.open_graphs(
            path, self._collection))
        graphs = opened.graphs
        merged = [examples.merge_duplicates(g)
                  if self._split == examples.TRAIN else None for _, g in graphs]
      except Exception as e:  # pylint: disable=broad-except
        # Unreadable input is data, not a crash: it goes to dead letters,
        # whatever it raised (one bad file never aborts the job).
        dead(e)
        return report
      for skipped in opened.skipped:
        dead(skipped)

      def records():
        for (gid, graph), merge in zip(graphs, merged):
          report["graphs_in"] += 1
          report["configs_merged"] += merge.merged if merge else 0
          yield from examples.graph_examples(graph, gid, k, self._split,
                                             o.hops, o.seed, o.max_examples,
                                             merge)
          report["configs"] += graph.num_configs
          report["graphs_converted"] += 1

      if graphs:
        # A fresh name per attempt: a retried or duplicated attempt never
        # writes into another's file (only the reported one is kept).
        # (Flat: one level under `temp` is what any filesystem can list.)
        shard = FileSystems.join(
            self._temp, f"{self._split}-{uuid.uuid4().hex}.tfrecord.gz")
        report["examples"] = _write_records(shard, records())
        report["shard"] = shard
    return report


def _empty_split() -> dict:
  return {"counts": dict.fromkeys(COUNTERS, 0), "files": {}}


class _Ledger(beam.CombineFn):
  """Per-file reports -> {split: {"counts": totals, "files": ledger}}."""

  def create_accumulator(self):
    return {}

  def add_input(self, accumulator, report):
    s = accumulator.setdefault(report["split"], _empty_split())
    entry = {k: v for k, v in report.items() if k not in ("split", "file")}
    if report["file"] in s["files"]:
      # Never expected (a runner emits one attempt's output); counted so
      # that `reconcile` reports it instead of a file silently lost.
      s["counts"]["files_in"] += 1
      return accumulator
    s["files"][report["file"]] = entry
    s["counts"]["files_in"] += 1
    for name in _FILE_COUNTS:
      s["counts"][name] += report[name]
    return accumulator

  def merge_accumulators(self, accumulators):
    out = {}
    for acc in accumulators:
      for split, s in acc.items():
        mine = out.setdefault(split, _empty_split())
        for name in COUNTERS:
          mine["counts"][name] += s["counts"][name]
        mine["files"].update(s["files"])
    return out

  def extract_output(self, accumulator):
    return accumulator


class _Finalize(beam.DoFn):
  """The merged ledger -> named shards, dead-letter files, the counts file.

  The pipeline's last step: every other step is upstream of it.
  """

  def __init__(self, outputs: Outputs, splits):
    super().__init__()
    self._outputs, self._splits = outputs, list(splits)

  def process(self, ledger):
    o = self._outputs
    ledger = copy.deepcopy(ledger)  # Beam inputs are not to be changed.
    summary = {"splits": {}}
    for split in self._splits:
      s = ledger.get(split, _empty_split())
      named = sorted((f, e["shard"]) for f, e in s["files"].items()
                     if e["shard"])
      if named:
        _mkdirs(os.path.dirname(o.shard(split, 0, 1)))
        FileSystems.rename(
            [tmp for _, tmp in named],
            [o.shard(split, i, len(named)) for i in range(len(named))])
        for i, (f, _) in enumerate(named):
          s["files"][f]["shard"] = o.shard(split, i, len(named))
      else:
        # As Beam's file sinks do: an empty split is one empty shard.
        _write_records(o.shard(split, 0, 1), [])
      dead = sorted((json.loads(r) for e in s["files"].values()
                     for r in e["dead"]),
                    key=lambda r: (r["file"], r["reason"]))
      path = o.dead_letters_file(split)
      if path:
        _mkdirs(os.path.dirname(path))
        with FileSystems.create(path) as f:
          f.write("".join(json.dumps(r) + "\n" for r in dead).encode())
      for entry in s["files"].values():
        entry["dead"] = [json.loads(r) for r in entry["dead"]]
      summary["splits"][split] = {**s, "dead_letters_file": path}
    progress.remove_dir(o.temp)
    # Last: its presence says that everything above was done.
    with FileSystems.create(o.summary) as f:
      f.write(json.dumps(summary, indent=2, sort_keys=True).encode())
    yield o.summary


def _mkdirs(path: str) -> None:
  # Local disks need the directory; object stores have none to make.
  if not FileSystems.exists(path):
    FileSystems.mkdirs(path)


@beam.ptransform_fn
def ConvertSplits(pipeline, files: dict, collection: str,  # pylint: disable=invalid-name
                  options: ConvertOptions, outputs: Outputs,
                  progress_dir: Optional[str] = None):
  """Converts the graph files of every split; writes `outputs`.

  Args:
    pipeline: The Beam pipeline (this is its whole graph: nothing may be
      applied after it, as the DaskRunner runs only the last step's inputs).
    files: {split: [graph file paths]}.
    collection: e.g. "layout:xla:random" (sets the kind and the graph ids).
    options: ConvertOptions.
    outputs: Where the shards, dead letters and counts file go.
    progress_dir: Where workers mark each file done (`progress`), if set.

  Returns:
    A PCollection of one element: the counts file's path, once written.
  """
  reports = [
      pipeline
      | f"Files[{split}]" >> beam.Create(graph_files.to_elements(paths))
      # Graphs differ in size by orders of magnitude: spread them out.
      | f"Reshuffle[{split}]" >> beam.Reshuffle()
      | f"Convert[{split}]" >> beam.ParDo(_GraphToShard(
          collection, split, options, outputs.temp, progress_dir))
      for split, paths in files.items()]
  return (tuple(reports)
          | "Reports" >> beam.Flatten()
          | "Ledger" >> beam.CombineGlobally(_Ledger()).without_defaults()
          | "Finalize" >> beam.ParDo(_Finalize(outputs, files)))


def read_text(path: str) -> Optional[str]:
  """A whole text file on any Beam filesystem (None if there is none)."""
  if not FileSystems.exists(path):
    return None
  with FileSystems.open(path) as f:
    return f.read().decode()


def read_jsonl(path: str) -> list[dict]:
  """The records of a JSON-lines file ([] if there is none)."""
  text = read_text(path)
  return [json.loads(line) for line in (text or "").splitlines()
          if line.strip()]


def read_summary(path: str) -> Optional[dict]:
  """The counts file a conversion wrote (None if there is none)."""
  text = read_text(path)
  return None if text is None else json.loads(text)


def reconcile(files: dict, summary: Optional[dict],
              outputs: Outputs) -> list[str]:
  """Mismatches between the inputs, the counts file and what was written.

  Every input file must be in the ledger once, as converted graphs (in a
  shard that exists) or dead letters with their reasons (in the split's
  dead-letter file, if one is written); the counts must add up:
  graphs_in == graphs_converted + dead_letters, files_in == input files.
  """
  if summary is None:
    return [f"{outputs.summary}: the pipeline wrote no counts file (its "
            "last step did not run)"]
  bad = []
  for split, paths in files.items():
    s = summary["splits"].get(split)
    if s is None:
      bad.append(f"{split}: not in {outputs.summary}")
      continue
    c, ledger = s["counts"], s["files"]
    given = {graph_files.printable(p) for p in graph_files.to_elements(paths)}
    missing, extra = sorted(given - set(ledger)), sorted(set(ledger) - given)
    if missing:
      bad.append(f"{split}: {len(missing)} file(s) neither converted nor "
                 f"dead-lettered, e.g. {missing[0]}")
    if extra:
      bad.append(f"{split}: {len(extra)} file(s) not among the inputs, e.g. "
                 f"{extra[0]}")
    if not (len(paths) == c["files_in"] and
            c["graphs_in"] == c["graphs_converted"] + c["dead_letters"]):
      bad.append(f"{split}: {len(paths)} files, {c['files_in']} read; "
                 f"{c['graphs_in']} graphs = {c['graphs_converted']} "
                 f"converted + {c['dead_letters']} dead letters?")
    for f, e in sorted(ledger.items()):
      if e["graphs_in"] < 1 or e["graphs_in"] != (
          e["graphs_converted"] + len(e["dead"])) or bool(e["shard"]) != bool(
              e["graphs_converted"]):
        bad.append(f"{split}: {f}: {e['graphs_in']} graphs = "
                   f"{e['graphs_converted']} converted (shard "
                   f"{e['shard']}) + {len(e['dead'])} dead letters?")
    shards = {e["shard"] for e in ledger.values() if e["shard"]}
    if shards:
      pattern = f"{outputs.prefix(split)}-*{outputs.suffix}"
      found = {m.path for m in FileSystems.match([pattern])[0].metadata_list}
      if found != shards:
        bad.append(f"{split}: {len(shards)} shards in the ledger, "
                   f"{len(found)} files {pattern}")
    path = s.get("dead_letters_file")
    if path:
      written = (len(read_jsonl(path)) if FileSystems.exists(path)
                 else None)
      if written != c["dead_letters"]:
        bad.append(f"{split}: {c['dead_letters']} dead letters counted, "
                   f"{written} in {path}")
  return bad
