"""Writes a collection split as GraphTensor TFRecords, in this process.

The small-data path (`tpurank train` on a local directory, tests): the same
examples as the Beam conversion, written by one process with a progress bar.
Bad graphs raise `InputError` (the CLI prints it and exits 2).
"""

import os
from typing import Optional

import tensorflow as tf
from tqdm import tqdm

from conversion import examples
from conversion import graph_files
from conversion import options
from schemas import npz_format
from schemas.errors import fail


def write_split(data_dir: str, collection: str, split: str, out_file: str,
                k: int, hops: int = options.DEFAULT_HOPS, seed: int = options.SEED,
                max_examples: Optional[int] = None,
                progress: bool = True) -> dict:
  """Writes one split's examples to `out_file` (GZIP TFRecord).

  Returns:
    Counts: graphs, examples, configs, and the kernels skipped as the
    official pipeline skips them (one line each).
  """
  files = graph_files.split_files(data_dir, collection, split)
  if not files:
    raise fail(npz_format.collection_dir(data_dir, collection, split),
               "directory", f"*.npz (or raw *.pb) files of {collection} "
               f"({split} split)", "none (make some with `tpurank synth`)")
  os.makedirs(os.path.dirname(out_file) or ".", exist_ok=True)
  counts = {"graphs": 0, "examples": 0, "configs": 0, "skipped": []}
  tmp = out_file + ".tmp"
  with tf.io.TFRecordWriter(tmp, options="GZIP") as writer:
    for path in tqdm(files, desc=f"{collection} {split}", unit="graph",
                     disable=not progress):
      with graph_files.open_graphs(path, collection) as opened:
        counts["skipped"] += [str(e) for e in opened.skipped]
        for gid, graph in opened.graphs:
          for ex in examples.graph_examples(graph, gid, k, split, hops, seed,
                                            max_examples):
            writer.write(ex)
            counts["examples"] += 1
          counts["graphs"] += 1
          counts["configs"] += graph.num_configs
  os.replace(tmp, out_file)
  return counts
