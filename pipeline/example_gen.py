"""A TFX ExampleGen for TpuGraphs collections, built on `ConvertGraphs`.

The splits are the dataset's own directories (`train/`, `valid/`, `test/`
under the collection directory), never a hash split across graphs: a graph
and its configs always stay in one split. The conversion options travel in
the component's `custom_config` (a `google.protobuf.Struct` packed in
`example_gen_pb2.CustomConfig`), so they are part of TFX's cache key; the
driver fingerprints the input files, so re-running on unchanged files
reuses the cached examples.

Dead letters of each split are written as JSON lines to
`<dead_letter_dir>/<split>.jsonl` when `dead_letter_dir` is set, and the run
fails if any file went there unless `allow_dead_letters` is true: a model
must not be trained on a silently shrunk dataset.

The executor runs the same conversion as `tpurank convert`
(`conversion.convert.ConvertSplits`, all splits in one Beam pipeline) on
any runner, the DaskRunner included (`--runner DaskRunner
--dask_client_address HOST:PORT` in the Beam args). It writes
`Split-<split>/data_tfrecord-SSSSS-of-NNNNN.gz` as TFX's own ExampleGen
does, and, last, `counts.json` in the examples artifact: the pipeline's own
counts and a ledger of every input file (format: `conversion/convert.py`).
After the run the executor reconciles that file with the input files and
what was written, then applies the dead-letter rule; no Beam metrics.
"""

import os
from typing import Optional

import apache_beam as beam
from google.protobuf import json_format
from google.protobuf import struct_pb2
from tfx.components.example_gen import base_example_gen_executor
from tfx.components.example_gen import utils as example_gen_utils
from tfx.components.example_gen import write_split
from tfx.components.example_gen.component import FileBasedExampleGen
from tfx.components.util import examples_utils
from tfx.dsl.components.base import executor_spec
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils
from tfx.types import standard_component_specs
from tfx.utils import proto_utils

from conversion import beam_args as beam_args_lib
from conversion import convert
from conversion import convert_job
from conversion import graph_files
from conversion import progress
from conversion.options import ConvertOptions
from schemas import npz_format

SPLITS = ("train", "valid", "test")


def make_custom_config(collection: str, options: ConvertOptions,
                       dead_letter_dir: str = "",
                       allow_dead_letters: bool = False
                       ) -> example_gen_pb2.CustomConfig:
  """Packs the conversion settings into ExampleGen's CustomConfig."""
  struct = struct_pb2.Struct()
  struct.update({"collection": collection, "options": options.to_json(),
                 "dead_letter_dir": dead_letter_dir,
                 "allow_dead_letters": allow_dead_letters})
  config = example_gen_pb2.CustomConfig()
  config.custom_config.Pack(struct)
  return config


def read_custom_config(exec_properties: dict) -> dict:
  """The settings `make_custom_config` packed (from exec properties)."""
  raw = exec_properties.get("custom_config")
  if not raw:
    raise ValueError("TpuGraphsExampleGen needs a custom_config naming the "
                     "collection (see make_custom_config)")
  config = example_gen_pb2.CustomConfig()
  if isinstance(raw, str):
    proto_utils.json_to_proto(raw, config)
  else:
    config.CopyFrom(raw)
  struct = struct_pb2.Struct()
  config.custom_config.Unpack(struct)
  return json_format.MessageToDict(struct)


def input_config(splits=SPLITS) -> example_gen_pb2.Input:
  """One ExampleGen split per dataset split directory."""
  return example_gen_pb2.Input(splits=[
      example_gen_pb2.Input.Split(name=s, pattern=f"{s}/*")
      for s in splits])


def _split_files(input_base: str, split_pattern: str) -> list[str]:
  """The graph files of one split, sorted."""
  pattern = os.path.join(input_base, split_pattern)
  return sorted(m.path for m in beam.io.filesystems.FileSystems.match(
      [pattern])[0].metadata_list if graph_files.is_graph_file(m.path))


COUNTS_FILE = "counts.json"  # In the examples artifact, written last.


def outputs(examples_uri: str, dead_letter_dir: str) -> convert.Outputs:
  """Where the executor's conversion writes (TFX's split layout)."""
  return convert.Outputs(
      examples=os.path.join(examples_uri, "Split-{split}",
                            write_split.DEFAULT_TF_RECORD_FILE_NAME),
      suffix=".gz",
      dead_letters=(os.path.join(dead_letter_dir, "{split}.jsonl")
                    if dead_letter_dir else ""),
      summary=os.path.join(examples_uri, COUNTS_FILE),
      temp=os.path.join(examples_uri, ".shards"))


class Executor(base_example_gen_executor.BaseExampleGenExecutor):
  """ExampleGen executor: TpuGraphs npz splits -> GraphTensor tf.Examples.

  `Do` builds one Beam pipeline for all splits (`convert.ConvertSplits`),
  writing each split's shards itself; TFX's per-split sinks are not used,
  as a pipeline with several final steps does not run on the DaskRunner.
  Shows graphs converted / total as the workers report them
  (`conversion.progress`), whatever the Beam runner.
  """

  def GetInputSourceToExamplePTransform(self) -> beam.PTransform:
    # Abstract in the base class, used only by its `Do`, which this
    # executor replaces.
    raise NotImplementedError("TpuGraphs ExampleGen converts and writes all "
                              "splits in Do (conversion.convert)")

  def Do(self, input_dict, output_dict, exec_properties):
    self._log_startup(input_dict, output_dict, exec_properties)
    input_config = example_gen_pb2.Input()
    proto_utils.json_to_proto(
        exec_properties[standard_component_specs.INPUT_CONFIG_KEY],
        input_config)
    output_config = example_gen_pb2.Output()
    proto_utils.json_to_proto(
        exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY],
        output_config)
    if output_config.split_config.splits:
      raise ValueError("TpuGraphsExampleGen keeps the dataset's own splits; "
                       "an output split_config is not supported")
    custom = read_custom_config(exec_properties)
    collection = custom["collection"]
    npz_format.collection_kind(collection)  # Fails early on a bad name.
    options = ConvertOptions.from_json(custom["options"])
    files = {}
    for split in input_config.splits:
      files[split.name] = _split_files(exec_properties["input_base"],
                                       split.pattern)
      if not files[split.name]:
        pattern = os.path.join(exec_properties["input_base"], split.pattern)
        raise ValueError(f"{pattern}: no graph files for split "
                         f"{split.name!r}")
    examples = artifact_utils.get_single_instance(
        output_dict[standard_component_specs.EXAMPLES_KEY])
    examples.split_names = artifact_utils.encode_split_names(
        example_gen_utils.generate_output_split_names(input_config,
                                                      output_config))
    outs = outputs(examples.uri, custom.get("dead_letter_dir") or "")
    marks = os.path.join(examples.uri, progress.PROGRESS_DIR)
    # `--runner DaskRunner` needs Beam's full name (`beam_args.for_runner`).
    self._beam_pipeline_args = beam_args_lib.for_runner(
        self._beam_pipeline_args)
    with progress.watch(marks, sum(map(len, files.values())),
                        "ExampleGen converted"):
      pipeline = self._make_beam_pipeline()
      _ = pipeline | "Convert" >> convert.ConvertSplits(
          files, collection, options, outs, marks)
      convert_job.run_pipeline(pipeline)
    counted = convert.read_summary(outs.summary)
    mismatches = convert.reconcile(files, counted, outs)
    if mismatches:
      raise ValueError("ExampleGen counts do not reconcile: " +
                       "; ".join(mismatches))
    dead = [d for s in counted["splits"].values()
            for e in s["files"].values() for d in e["dead"]]
    if dead and not custom.get("allow_dead_letters"):
      raise ValueError(f"{len(dead)} graph file(s) could not be converted "
                       f"(first: {dead[0]['reason']}); see the dead letters "
                       "for the reasons, or set allow_dead_letters")
    payload = exec_properties.get(
        standard_component_specs.OUTPUT_DATA_FORMAT_KEY)
    if payload:
      examples_utils.set_payload_format(examples, payload)
    file_format = exec_properties.get(
        standard_component_specs.OUTPUT_FILE_FORMAT_KEY)
    if file_format:
      examples_utils.set_file_format(
          examples, write_split.to_file_format_str(file_format))


def TpuGraphsExampleGen(data_dir: str, collection: str,  # pylint: disable=invalid-name
                        options: ConvertOptions,
                        dead_letter_dir: str = "",
                        allow_dead_letters: bool = False,
                        splits=("train", "valid"),
                        output_file_format: Optional[int] = None
                        ) -> FileBasedExampleGen:
  """The ExampleGen component of one collection.

  Args:
    data_dir: Directory holding npz/... (local path or any TFX filesystem).
    collection: e.g. "layout:xla:random".
    options: ConvertOptions.
    dead_letter_dir: Where bad files' reasons go ("" : nowhere).
    allow_dead_letters: Let the run succeed when some files were bad.
    splits: Dataset splits to convert.
    output_file_format: example_gen_pb2.FileFormat (default: GZIP TFRecords).
  """
  kwargs = {}
  if output_file_format is not None:
    kwargs["output_file_format"] = output_file_format
  return FileBasedExampleGen(
      input_base=os.path.dirname(
          npz_format.collection_dir(data_dir, collection, "train")),
      input_config=input_config(splits),
      custom_config=make_custom_config(collection, options, dead_letter_dir,
                                       allow_dead_letters),
      custom_executor_spec=executor_spec.BeamExecutorSpec(Executor),
      **kwargs).with_id("TpuGraphsExampleGen")

