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
"""

import os
from typing import Any, Optional

import apache_beam as beam
from google.protobuf import json_format
from google.protobuf import struct_pb2
from tfx.components.example_gen import base_example_gen_executor
from tfx.components.example_gen.component import FileBasedExampleGen
from tfx.dsl.components.base import executor_spec
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils
from tfx.types import standard_component_specs
from tfx.utils import proto_utils

from conversion import convert
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


class _DeadLetterCheck(beam.DoFn):
  """Fails the run on dead letters unless they are allowed."""

  def __init__(self, allow: bool):
    super().__init__()
    self._allow = allow

  def process(self, count: int):
    if count and not self._allow:
      raise ValueError(f"{count} graph file(s) could not be converted; see "
                       "the dead letters for the reasons, or set "
                       "allow_dead_letters")
    yield count


@beam.ptransform_fn
@beam.typehints.with_input_types(beam.Pipeline)
@beam.typehints.with_output_types(bytes)
def _TpuGraphsToExample(pipeline: beam.Pipeline,  # pylint: disable=invalid-name
                        exec_properties: dict[str, Any],
                        split_pattern: str) -> beam.pvalue.PCollection:
  """Converts one split (`<split>/*.npz|*.pb` under input_base)."""
  custom = read_custom_config(exec_properties)
  collection = custom["collection"]
  npz_format.collection_kind(collection)  # Fails early on a bad name.
  options = ConvertOptions.from_json(custom["options"])
  split = split_pattern.split("/")[0]
  pattern = os.path.join(exec_properties["input_base"], split_pattern)
  files = _split_files(exec_properties["input_base"], split_pattern)
  if not files:
    raise ValueError(f"{pattern}: no graph files for split {split!r}")
  out = (pipeline
         | "Files" >> beam.Create(graph_files.to_elements(files))
         | "Convert" >> convert.ConvertGraphs(
             collection, split, options,
             exec_properties.get(_PROGRESS_KEY)))
  dead = out[convert.DEAD_LETTERS]
  if custom.get("dead_letter_dir"):
    _ = dead | "WriteDead" >> beam.io.WriteToText(
        os.path.join(custom["dead_letter_dir"], split),
        file_name_suffix=".jsonl", shard_name_template="")
  _ = (dead
       | "CountDead" >> beam.combiners.Count.Globally()
       | "CheckDead" >> beam.ParDo(_DeadLetterCheck(
           bool(custom.get("allow_dead_letters")))))
  return out[convert.EXAMPLES]


def _split_files(input_base: str, split_pattern: str) -> list[str]:
  """The graph files of one split, sorted."""
  pattern = os.path.join(input_base, split_pattern)
  return sorted(m.path for m in beam.io.filesystems.FileSystems.match(
      [pattern])[0].metadata_list if graph_files.is_graph_file(m.path))


# Where the executor tells the conversion to mark files done (set in Do).
_PROGRESS_KEY = "_tpurank_progress_dir"


class Executor(base_example_gen_executor.BaseExampleGenExecutor):
  """ExampleGen executor: TpuGraphs npz splits -> GraphTensor tf.Examples.

  Shows graphs converted / total as the workers report them
  (`conversion.progress`), whatever the Beam runner.
  """

  def GetInputSourceToExamplePTransform(self) -> beam.PTransform:
    return _TpuGraphsToExample

  def Do(self, input_dict, output_dict, exec_properties):
    examples = artifact_utils.get_single_uri(
        output_dict[standard_component_specs.EXAMPLES_KEY])
    marks = os.path.join(examples, progress.PROGRESS_DIR)
    config = example_gen_pb2.Input()
    proto_utils.json_to_proto(
        exec_properties[standard_component_specs.INPUT_CONFIG_KEY], config)
    total = sum(len(_split_files(exec_properties["input_base"], s.pattern))
                for s in config.splits)
    with progress.watch(marks, total, "ExampleGen converted"):
      super().Do(input_dict, output_dict,
                 dict(exec_properties, **{_PROGRESS_KEY: marks}))


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

