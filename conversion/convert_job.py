"""The `tpurank convert` Beam job: a collection directory -> TFRecords.

Graph files are TpuGraphs `.npz` or raw tuning `.pb` protos.

Writes, under OUT:
  <split>/examples-SSSSS-of-NNNNN.tfrecord.gz  serialized GraphTensor examples
  dead_letters/<split>.jsonl                   one JSON record per bad file
  conversion.json                              counts per split, options, and
                                               whether they reconcile
The default runner is Beam's DirectRunner in multi-processing mode over all
cores; any other runner comes in through standard Beam pipeline options
(e.g. `--runner DataflowRunner --project P --region R --temp_location gs://`).
"""

import glob
import json
import os
from typing import Optional, Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions

from conversion import beam_args as beam_args_lib
from conversion import convert
from conversion import graph_files
from conversion import progress
from conversion.options import ConvertOptions
from schemas import npz_format
from schemas.errors import fail

SPLITS = ("train", "valid", "test")


def default_beam_args(beam_args: Sequence[str]) -> list[str]:
  """The multi-processing DirectRunner unless a runner is given; the user's
  flags replace the defaults they name (`beam_args.merge`)."""
  if "runner" in {n for n, _ in beam_args_lib.split_flags(beam_args)}:
    return list(beam_args)
  return beam_args_lib.merge(
      ["--runner=DirectRunner", "--direct_running_mode=multi_processing",
       f"--direct_num_workers={os.cpu_count() or 1}"], beam_args)


def pipeline_options(beam_args: Sequence[str]) -> PipelineOptions:
  """Beam options: the user's flags over the default runner.

  Raises:
    InputError: a flag that neither the command nor Beam knows (Beam alone
      would only log "Discarding unparseable args" and go on without it).
  """
  options = PipelineOptions(default_beam_args(beam_args))
  unknown = set(options.get_all_options(retain_unknown_options=True)) - set(
      options.get_all_options())
  if unknown:
    flags = [a.split("=")[0] for a in beam_args if a.startswith("--") and
             a[2:].split("=")[0].replace("-", "_") in unknown]
    raise fail("<command line>", (flags or sorted(unknown))[0],
               "a flag of this command or a Beam pipeline option",
               "an unknown flag")
  return options


def prepare_output(out_dir: str, overwrite: bool):
  """Outputs never mix runs: a non-empty `out_dir` is refused, or cleared
  first with `overwrite`.

  Raises:
    InputError: `out_dir` holds files and `overwrite` is off.
  """
  pattern = FileSystems.join(out_dir, "**")
  found = [m.path for m in FileSystems.match([pattern])[0].metadata_list]
  if not found:
    return
  if not overwrite:
    raise fail(out_dir, "--out", "a new or empty directory (or --overwrite "
               "to replace what is there)", f"{len(found)} files of an "
               "earlier run")
  FileSystems.delete([out_dir])


def split_files(data_dir: str, collection: str) -> dict:
  """{split: sorted graph files}; splits without files are left out."""
  files = {split: found for split in SPLITS
           if (found := graph_files.split_files(data_dir, collection, split))}
  if not files:
    raise fail(os.path.dirname(npz_format.collection_dir(
        data_dir, collection, "train")), "directory", "train/valid/test "
               f"*.npz (or raw *.pb) files of {collection}",
               "none (make some with `tpurank synth`)")
  return files


def counters(result, splits: Sequence[str]) -> dict:
  """{split: {counter: committed value}} from a finished pipeline."""
  out = {s: dict.fromkeys(convert.COUNTERS, 0) for s in splits}
  for split in splits:
    query = result.metrics().query(
        MetricsFilter().with_namespace(convert.namespace(split)))
    for c in query["counters"]:
      value = c.committed if c.committed is not None else c.attempted
      out[split][c.key.metric.name] += int(value or 0)
  return out


def reconcile(files: dict, counts: dict) -> list[str]:
  """Mismatches between input files and what the counters saw."""
  bad = []
  for split, paths in files.items():
    c = counts[split]
    if not (len(paths) == c["files_in"] and
            c["graphs_in"] == c["graphs_converted"] + c["dead_letters"]):
      bad.append(f"{split}: {len(paths)} files, {c['files_in']} read; "
                 f"{c['graphs_in']} graphs = {c['graphs_converted']} "
                 f"converted + {c['dead_letters']} dead letters?")
  return bad


def read_jsonl(path: str) -> list[dict]:
  """The records of a JSON-lines file ([] if it does not exist)."""
  if not os.path.exists(path):
    return []
  with open(path) as f:
    return [json.loads(line) for line in f if line.strip()]


def read_dead_letters(out_dir: str) -> list[dict]:
  """All dead-letter records a conversion wrote."""
  return [r for path in sorted(glob.glob(os.path.join(
      out_dir, "dead_letters", "*.jsonl"))) for r in read_jsonl(path)]


def run(data_dir: str, collection: str, out_dir: str,
        options: ConvertOptions,
        beam_args: Sequence[str] = (),
        splits: Optional[Sequence[str]] = None,
        overwrite: bool = False) -> dict:
  """Runs the conversion; returns (and writes) the summary.

  Args:
    data_dir: Directory holding npz/... as `tpurank synth` writes it.
    collection: e.g. "tile:xla".
    out_dir: Output directory (local or any filesystem Beam writes to).
    options: ConvertOptions.
    beam_args: Beam pipeline options (default: multi-processing DirectRunner).
    splits: Only these splits (default: all present).
    overwrite: Clear a non-empty `out_dir` first (else it is refused).
  """
  files = split_files(data_dir, collection)
  if splits:
    files = {s: f for s, f in files.items() if s in splits}
  # Bad flags fail before anything of an earlier run is cleared.
  beam_options = pipeline_options(beam_args)
  prepare_output(out_dir, overwrite)
  pipeline = beam.Pipeline(options=beam_options)
  marks = FileSystems.join(out_dir, progress.PROGRESS_DIR)
  for split, paths in files.items():
    out = (pipeline
           | f"Files[{split}]" >> beam.Create(graph_files.to_elements(paths))
           | f"Convert[{split}]" >> convert.ConvertGraphs(collection, split,
                                                          options, marks))
    _ = out[convert.EXAMPLES] | f"Write[{split}]" >> beam.io.WriteToTFRecord(
        os.path.join(out_dir, split, "examples"),
        file_name_suffix=".tfrecord.gz",
        compression_type=beam.io.filesystem.CompressionTypes.GZIP)
    _ = out[convert.DEAD_LETTERS] | f"Dead[{split}]" >> beam.io.WriteToText(
        os.path.join(out_dir, "dead_letters", split),
        file_name_suffix=".jsonl", shard_name_template="")
  with progress.watch(marks, sum(map(len, files.values())), "converted"):
    result = pipeline.run()
    result.wait_until_finish()
  counts = counters(result, list(files))
  summary = {"collection": collection, "data": data_dir,
             "options": json.loads(options.to_json()), "splits": counts,
             "mismatches": reconcile(files, counts)}
  with beam.io.filesystems.FileSystems.create(
      os.path.join(out_dir, "conversion.json")) as f:
    f.write(json.dumps(summary, indent=2).encode())
  return summary
