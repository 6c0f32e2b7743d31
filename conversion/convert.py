"""Beam conversion: TpuGraphs graph files -> serialized GraphTensor examples.

`ConvertGraphs` is the PTransform that the `tpurank convert` pipeline and the
TFX ExampleGen share. Each graph file becomes one example per chunk of
configs (`conversion/examples.py`); a file that cannot be read or fails
validation becomes one dead-letter record (JSON: file, field, reason) on the
`dead_letters` output instead. Beam counters in the namespace
`tpurank.<split>` count files in, graphs in/converted/dead, examples,
configs and merged duplicate configs, so every run can show that its counts
reconcile: graphs_in == graphs_converted + dead_letters. Files are `.npz`
(one graph) or raw tuning `.pb` (one graph, or one per tile kernel); an
unreadable file counts as one graph, in dead letters.
"""

import contextlib
import json
from typing import Optional

import apache_beam as beam

from conversion import examples
from conversion import graph_files
from conversion import progress
from conversion.options import ConvertOptions
from schemas.errors import InputError

DEAD_LETTERS = "dead_letters"
EXAMPLES = "examples"
COUNTERS = ("files_in", "graphs_in", "graphs_converted", "dead_letters",
            "examples", "configs", "configs_merged")


def namespace(split: str) -> str:
  """The Beam metrics namespace of one split's counters."""
  return f"tpurank.{split}"


def dead_letter(path: str, error: Exception) -> str:
  """The JSON dead-letter record of a file that could not be converted."""
  if isinstance(error, InputError):
    field, reason = error.problem.field, str(error)
  else:
    field = "file"
    reason = f"{path}: file: {type(error).__name__}: {error}"
  return json.dumps({"file": path, "field": field, "reason": reason})


class _GraphToExamples(beam.DoFn):
  """One graph file -> its examples, or one dead letter."""

  def __init__(self, collection: str, split: str, options: ConvertOptions,
               progress_dir: Optional[str] = None):
    super().__init__()
    self._collection, self._split, self._options = collection, split, options
    self._progress = progress_dir
    ns = namespace(split)
    self._counters = {n: beam.metrics.Metrics.counter(ns, n) for n in
                      COUNTERS}

  def process(self, element):
    return progress.marking(self._progress, element, self._convert(element))

  def _convert(self, element):
    c = self._counters
    c["files_in"].inc()
    o = self._options
    k = o.k if self._split == examples.TRAIN else o.eval_k
    path = graph_files.printable(element)
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
        c["graphs_in"].inc()
        c["dead_letters"].inc()
        yield beam.pvalue.TaggedOutput(DEAD_LETTERS, dead_letter(path, e))
        return
      for skipped in opened.skipped:
        c["graphs_in"].inc()
        c["dead_letters"].inc()
        yield beam.pvalue.TaggedOutput(DEAD_LETTERS, dead_letter(path, skipped))
      for (gid, graph), merge in zip(graphs, merged):
        c["graphs_in"].inc()
        c["configs_merged"].inc(merge.merged if merge else 0)
        for ex in examples.graph_examples(graph, gid, k, self._split, o.hops,
                                          o.seed, o.max_examples, merge):
          c["examples"].inc()
          yield ex
        c["configs"].inc(graph.num_configs)
        c["graphs_converted"].inc()


@beam.ptransform_fn
def ConvertGraphs(files, collection: str, split: str,  # pylint: disable=invalid-name
                  options: ConvertOptions,
                  progress_dir: Optional[str] = None):
  """PCollection of graph file paths -> {examples, dead_letters}.

  Args:
    files: PCollection of paths of one split.
    collection: e.g. "layout:xla:random" (sets the kind and the graph ids).
    split: "train", "valid" or "test".
    options: ConvertOptions.
    progress_dir: Where workers mark each file done (`progress`), if set.

  Returns:
    A DoOutputsTuple: `.examples` (serialized tf.Example bytes) and
    `.dead_letters` (JSON strings).
  """
  return (files
          # Graphs differ in size by orders of magnitude: spread them out.
          | "Reshuffle" >> beam.Reshuffle()
          | "ToExamples" >> beam.ParDo(
              _GraphToExamples(collection, split, options,
                               progress_dir)).with_outputs(
                  DEAD_LETTERS, main=EXAMPLES))
