"""One graph -> serialized GraphTensor examples.

Shared by the Beam conversion and by tests/benchmarks that need records
without Beam. A train graph gives one example: the graph once, with its
sampled configs in a deterministic shuffled order (seeded by the graph id),
at most `max_examples` chunks of K, identical configs merged first (one
representative, runtimes averaged) so that no list holds two copies of a
config with contradicting labels. The input pipeline cuts it into chunks of
K configs (`trainer.input_fn.config_chunks`), so the graph is stored once,
not once per chunk. Valid/test graphs give every config, in order, in
examples of K (the served `examples` signature's unit), so evaluation and
scoring see them all.
"""

import dataclasses
import hashlib
import zlib
from typing import Iterator, Optional

import numpy as np

from conversion import options
from conversion import prune
from schemas import graph_tensor
from schemas import npz_format

TRAIN = "train"


def config_chunks(num_configs: int, k: int, split: str, gid: str,
                  seed: int = 0,
                  max_examples: Optional[int] = None) -> list[np.ndarray]:
  """Config indices of each example of one graph.

  Args:
    num_configs: Configs in the graph.
    k: Configs per example.
    split: "train" shuffles (deterministically); other splits keep order.
    gid: Graph id, part of the shuffle's seed.
    seed: Base seed.
    max_examples: At most this many chunks per train graph (None: all).

  Returns:
    Index arrays of length k (the last one may be shorter).
  """
  order = np.arange(num_configs)
  if split == TRAIN:
    rng = np.random.default_rng([seed, zlib.crc32(gid.encode())])
    order = rng.permutation(num_configs)
  chunks = [order[i:i + k] for i in range(0, num_configs, k)]
  if split == TRAIN and max_examples is not None:
    chunks = chunks[:max_examples]
  return chunks


@dataclasses.dataclass
class Merged:
  """Identical configs of one graph, merged.

  Attributes:
    graph: The graph with each config's runtime replaced by the mean runtime
      of its identical configs.
    representatives: Sorted index of the first config of each group.
    merged: Configs dropped as duplicates (num_configs - representatives).
  """
  graph: npz_format.Graph
  representatives: np.ndarray
  merged: int


def merge_duplicates(graph: npz_format.Graph, chunk: int = 4096) -> Merged:
  """Groups configs with identical features (streamed in chunks)."""
  keys = []
  for feat in graph.iter_config_feat(chunk):
    rows = np.ascontiguousarray(feat).reshape(len(feat), -1)
    keys += [hashlib.blake2b(r.tobytes(), digest_size=16).digest()
             for r in rows]
  _, first, group = np.unique(np.array(keys, dtype="S16"), return_index=True,
                              return_inverse=True)
  if len(first) == graph.num_configs:
    return Merged(graph, np.arange(graph.num_configs), 0)
  runtime = graph.config_runtime.astype(np.float64)
  mean = (np.bincount(group, weights=runtime) /
          np.bincount(group))[group]
  averaged = dataclasses.replace(
      graph, config_runtime=np.rint(mean).astype(graph.config_runtime.dtype))
  return Merged(averaged, np.sort(first), graph.num_configs - len(first))


def graph_examples(graph: npz_format.Graph, gid: str, k: int, split: str,
                   hops: int = options.DEFAULT_HOPS, seed: int = 0,
                   max_examples: Optional[int] = None,
                   merged: Optional[Merged] = None) -> Iterator[bytes]:
  """Yields the serialized examples of one graph (train: one).

  Args:
    graph: The loaded graph.
    gid: Its id, `<collection>:<stem>`.
    k: Configs per example (train: per chunk).
    split: "train", "valid" or "test".
    hops: Layout graphs keep their configurable nodes' `hops`-hop
      neighbourhood (-1: the whole graph).
    seed: Shuffle seed (train).
    max_examples: Bound on examples per train graph.
    merged: `merge_duplicates(graph)` if the caller already has it (train;
      saves a second pass over every config).
  """
  if split == TRAIN:
    merged = merged or merge_duplicates(graph)
    graph = merged.graph
    reps = merged.representatives
    chunks = [reps[c] for c in config_chunks(len(reps), k, split, gid, seed,
                                              max_examples)]
  else:
    chunks = config_chunks(graph.num_configs, k, split, gid, seed,
                           max_examples)
  sub = prune.prune(graph, hops)
  if split == TRAIN:
    # One example: its configs are the chunks' in order, so cutting it
    # into K-config pieces gives back each chunk.
    if chunks:
      wanted = np.concatenate(chunks)
      yield graph_tensor.serialize(graph_tensor.build(
          sub, gid, wanted, graph.take_config_feat(wanted)))
  else:
    # In order: stream the config features chunk by chunk.
    for idx, feat in zip(chunks, graph.iter_config_feat(k)):
      yield graph_tensor.serialize(graph_tensor.build(sub, gid, idx, feat))
