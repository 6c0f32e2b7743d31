"""The `tpurank convert` Beam job: a collection directory -> TFRecords.

Graph files are TpuGraphs `.npz` or raw tuning `.pb` protos.

Writes, under OUT:
  <split>/examples-SSSSS-of-NNNNN.tfrecord.gz  serialized GraphTensor examples
  dead_letters/<split>.jsonl                   one JSON record per bad file
  counts.json                                  what the pipeline itself saw:
                                               counts per split and a ledger
                                               of every input file (its
                                               shard or dead letters), see
                                               `conversion/convert.py`
  conversion.json                              counts per split, options, and
                                               whether they reconcile
Counts come from the pipeline's own outputs, not Beam metrics: the
pipeline writes counts.json as its last step and `run` then checks it
against the input files and the files written (`convert.reconcile`), the
same on every runner.

The default runner is Beam's DirectRunner in multi-processing mode over all
cores; any other runner comes in through standard Beam pipeline options
(e.g. `--runner DataflowRunner --project P --region R --temp_location gs://`,
or `--runner DaskRunner --dask_client_address HOST:PORT` for a
dask.distributed cluster).
"""

import glob
import json
import os
from typing import Optional, Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from conversion import beam_args as beam_args_lib
from conversion import convert
from conversion import graph_files
from conversion import progress
from conversion.options import ConvertOptions
from schemas import npz_format
from schemas.errors import fail

SPLITS = ("train", "valid", "test")
COUNTS_FILE = "counts.json"  # Written by the pipeline itself, last.


def default_beam_args(beam_args: Sequence[str]) -> list[str]:
  """The multi-processing DirectRunner unless a runner is given; the user's
  flags replace the defaults they name (`beam_args.merge`). A runner of the
  user's own gets only its own flags (`beam_args.for_runner`: the
  DaskRunner's full name and partitioning)."""
  if beam_args_lib.runner(beam_args) is not None:
    return beam_args_lib.for_runner(beam_args)
  return beam_args_lib.merge(
      ["--runner=DirectRunner", "--direct_running_mode=multi_processing",
       f"--direct_num_workers={os.cpu_count() or 1}"], beam_args)


def pipeline_options(beam_args: Sequence[str]) -> PipelineOptions:
  """Beam options: the user's flags over the default runner.

  Raises:
    InputError: a flag that neither the command nor Beam knows (Beam alone
      would only log "Discarding unparseable args" and go on without it).
  """
  dask_flags = [a.split("=")[0] for a in beam_args
                if (beam_args_lib.flag_name(a) or "").startswith("dask_")]
  if dask_flags and not beam_args_lib.is_dask(beam_args):
    # Any other runner would ignore it without a word.
    given = beam_args_lib.runner(beam_args) or "DirectRunner (the default)"
    raise fail("<command line>", dask_flags[0],
               "--runner DaskRunner (a Dask flag)", f"runner {given}")
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


def outputs(out_dir: str) -> convert.Outputs:
  """Where `run` writes (see the module docstring)."""
  return convert.Outputs(
      examples=os.path.join(out_dir, "{split}", "examples"),
      suffix=".tfrecord.gz",
      dead_letters=os.path.join(out_dir, "dead_letters", "{split}.jsonl"),
      summary=os.path.join(out_dir, COUNTS_FILE),
      temp=os.path.join(out_dir, ".shards"))


def run_pipeline(pipeline: beam.Pipeline) -> None:
  """Runs `pipeline` to completion (a worker's error is raised here)."""
  result = pipeline.run()
  try:
    result.wait_until_finish()
  finally:
    # The DaskRunner leaves its dask.distributed client connected; closed,
    # it does not outlive the job (nor log when the cluster goes away).
    client = getattr(result, "client", None)
    if client is not None:
      client.close()


def read_dead_letters(out_dir: str) -> list[dict]:
  """All dead-letter records a conversion wrote."""
  return [r for path in sorted(glob.glob(os.path.join(
      out_dir, "dead_letters", "*.jsonl"))) for r in convert.read_jsonl(path)]


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
  outs = outputs(out_dir)
  pipeline = beam.Pipeline(options=beam_options)
  marks = FileSystems.join(out_dir, progress.PROGRESS_DIR)
  _ = pipeline | "Convert" >> convert.ConvertSplits(files, collection,
                                                     options, outs, marks)
  with progress.watch(marks, sum(map(len, files.values())), "converted"):
    run_pipeline(pipeline)
  counted = convert.read_summary(outs.summary)
  found = {s: (counted["splits"][s]["counts"] if counted and
               s in counted["splits"] else {}) for s in files}
  counts = {s: {n: c.get(n, 0) for n in convert.COUNTERS}  # Their order.
            for s, c in found.items()}
  summary = {"collection": collection, "data": data_dir,
             "options": json.loads(options.to_json()), "splits": counts,
             "mismatches": convert.reconcile(files, counted, outs)}
  with FileSystems.create(os.path.join(out_dir, "conversion.json")) as f:
    f.write(json.dumps(summary, indent=2).encode())
  return summary
