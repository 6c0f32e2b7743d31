"""Builds small record files from simulated graphs for trainer tests."""

import os

import numpy as np
import tensorflow as tf

from conversion import examples
from schemas import npz_format
from simulator import synth


def make_records(tmp_path, kind: str, graphs: int = 3, k: int = 6,
                 split: str = "train", seed: int = 0, gzip: bool = True):
  """Writes `graphs` simulated graphs as examples; returns (file, graphs)."""
  loaded = []
  path = os.path.join(str(tmp_path), f"{kind}-{split}-{seed}.tfrecord")
  with tf.io.TFRecordWriter(path, options="GZIP" if gzip else "") as w:
    for i in range(graphs):
      npz = os.path.join(str(tmp_path), f"{kind}-{split}-{seed}-{i}.npz")
      rng = np.random.default_rng(seed * 100 + i)
      if kind == "tile":
        synth.write_tile_graph(npz, rng, synth.SCALES["tiny"])
      else:
        synth.write_layout_graph(npz, rng, synth.SCALES["tiny"], "xla",
                                 "random")
      g = npz_format.load_graph(npz)
      loaded.append(g)
      coll = "tile:xla" if kind == "tile" else "layout:xla:random"
      for ex in examples.graph_examples(g, npz_format.graph_id(coll, npz), k,
                                        split, hops=1, max_examples=3):
        w.write(ex)
  return path, loaded


def unit_stats():
  from trainer.model import FeatureStats  # pylint: disable=g-import-not-at-top
  return FeatureStats(np.zeros(140, np.float32), np.ones(140, np.float32),
                      np.zeros(24, np.float32), np.ones(24, np.float32))
