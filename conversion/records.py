"""Writes a collection split as GraphTensor TFRecords, in this process.

The small-data path (`tpurank train` on a local directory, tests): the same
examples as the Beam conversion, written by one process with a progress bar.
Bad graphs raise `InputError` (the CLI prints it and exits 2).
"""

import glob
import os
from typing import Optional

import tensorflow as tf
from tqdm import tqdm

from conversion import examples
from schemas import npz_format
from schemas.errors import fail
from conversion import options


def split_files(data_dir: str, collection: str, split: str) -> list[str]:
  """The npz files of one split, sorted."""
  folder = npz_format.collection_dir(data_dir, collection, split)
  files = sorted(glob.glob(os.path.join(folder, "*.npz")))
  if not files:
    raise fail(folder, "directory",
               f"*.npz files of {collection} ({split} split)",
               "none (make some with `tpurank synth`)")
  return files


def write_split(data_dir: str, collection: str, split: str, out_file: str,
                k: int, hops: int = options.DEFAULT_HOPS, seed: int = 0,
                max_examples: Optional[int] = None,
                progress: bool = True) -> dict:
  """Writes one split's examples to `out_file` (GZIP TFRecord).

  Returns:
    Counts: graphs, examples, configs.
  """
  kind = npz_format.collection_kind(collection)
  files = split_files(data_dir, collection, split)
  os.makedirs(os.path.dirname(out_file) or ".", exist_ok=True)
  counts = {"graphs": 0, "examples": 0, "configs": 0}
  tmp = out_file + ".tmp"
  with tf.io.TFRecordWriter(tmp, options="GZIP") as writer:
    for path in tqdm(files, desc=f"{collection} {split}", unit="graph",
                     disable=not progress):
      graph = npz_format.load_graph(path, kind)
      gid = npz_format.graph_id(collection, path)
      for ex in examples.graph_examples(graph, gid, k, split, hops, seed,
                                        max_examples):
        writer.write(ex)
        counts["examples"] += 1
      counts["graphs"] += 1
      counts["configs"] += graph.num_configs
  os.replace(tmp, out_file)
  return counts
