"""Bounding the memory of one model call by its expanded graph size.

A layout model copies the (pruned) graph once per config of every example,
and holds ~5 KB of activations per op copy: 4 examples x 128 configs of a
3k-op graph take ~7 GB. Every scoring path (in-process, server, batch)
therefore runs its examples through the model in groups of at most a budget
of op copies (one example at least), which is exact: examples are scored
independently.
"""

from typing import Callable, Iterator, Sequence

import numpy as np
import tensorflow as tf

from serving import options



class NotAnExample(ValueError):
  """A request item is not a serialized tf.Example."""


def op_copies(serialized: bytes) -> int:
  """Op nodes one example expands to in the model: its graph once per
  config (layout) or once (tile)."""
  try:
    feature = tf.train.Example.FromString(serialized).features.feature
  except Exception as e:  # pylint: disable=broad-except  (DecodeError)
    raise NotAnExample(f"not a serialized tf.Example ({e})") from e
  size = lambda name: sum(feature[name].int64_list.value) if (
      name in feature) else 0
  ops, configs = size("nodes/op.#size"), size("nodes/config.#size")
  return ops * configs if "nodes/node_config.#size" in feature else ops


def groups(costs: Sequence[int], budget: int) -> Iterator[slice]:
  """Consecutive runs of items whose costs sum to at most `budget` (an item
  over budget alone)."""
  start, total = 0, 0
  for i, cost in enumerate(costs):
    if i > start and total + cost > budget:
      yield slice(start, i)
      start, total = i, 0
    total += cost
  if start < len(costs):
    yield slice(start, len(costs))


def _stack(parts: list, fill) -> np.ndarray:
  """Row-stacks [n_i, K_i] arrays, padding each to the widest K."""
  width = max(p.shape[1] for p in parts)
  return np.concatenate([np.pad(p, ((0, 0), (0, width - p.shape[1])),
                                constant_values=fill) for p in parts])


def score_in_groups(score: Callable, serialized: Sequence[bytes],
                    budget: int = options.MAX_OP_COPIES):
  """`score(list of examples) -> (scores, config_index)`, called on groups
  within `budget`; returns the same as one call on all of them would
  ([n, K_max] each; padding: score 0, index -1)."""
  serialized = list(serialized)
  costs = [op_copies(s) for s in serialized]
  scores, index = [], []
  for part in groups(costs, budget):
    s, i = score(serialized[part])
    scores.append(s)
    index.append(i)
  return _stack(scores, 0.0), _stack(index, -1)
