"""Writes a collection split as GraphTensor TFRecords, in this process.

The small-data path (`tpurank train` on a local directory, tests): the same
examples as the Beam conversion, written by one process with a progress bar.
Bad graphs raise `InputError` (the CLI prints it and exits 2). Beside each
record file, `<file>.json` keeps what it was made from (the graph files'
names, sizes and times, and the conversion options), so a later run reuses
records only when they are of the same data made the same way.
"""

import json
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
                     disable=None if progress else True):
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


def provenance(data_dir: str, collection: str, split: str, k: int,
               hops: int, seed: int, max_examples: Optional[int]) -> dict:
  """What records of one split are made from: files and options."""
  stats = [(os.path.abspath(f), os.stat(f))
           for f in graph_files.split_files(data_dir, collection, split)]
  return {"collection": collection, "split": split, "k": k, "hops": hops,
          "seed": seed, "max_examples": max_examples,
          "files": [[f, st.st_size, st.st_mtime_ns] for f, st in stats]}


def ensure_split(data_dir: str, collection: str, split: str, out_file: str,
                 k: int, hops: int, seed: int, max_examples: Optional[int]
                 ) -> Optional[dict]:
  """Writes one split's records unless `out_file` already holds them.

  Returns:
    `write_split`'s counts, or None when the records were reused.

  Raises:
    InputError: `out_file` holds records of other data or other options
      (they would mix runs: use another output directory).
  """
  made_of = provenance(data_dir, collection, split, k, hops, seed,
                       max_examples)
  stamp = out_file + ".json"
  if os.path.exists(out_file):
    found = None
    if os.path.exists(stamp):
      with open(stamp) as f:
        found = json.load(f)
    if found == made_of:
      return None
    differ = sorted(key for key in made_of
                    if not found or found.get(key) != made_of[key])
    raise fail(out_file, "records", "records of this data and these "
               "options (use a new --out)", "records of other "
               f"{', '.join(differ)}" if found else
               "records without provenance")
  # The stamp first: the record file appears (atomically) only after it.
  os.makedirs(os.path.dirname(out_file) or ".", exist_ok=True)
  with open(stamp + ".tmp", "w") as f:
    json.dump(made_of, f)
  os.replace(stamp + ".tmp", stamp)
  return write_split(data_dir, collection, split, out_file, k, hops, seed,
                     max_examples)
