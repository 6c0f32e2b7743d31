"""Bounding the memory of one model call by its expanded graph size.

An early-join layout model copies the (pruned) graph once per config of
every example and holds ~5 KB of activations per op copy: 4 examples x 128
configs of a 3k-op graph take ~7 GB. A late-join model holds the graph once
per example and, per config, rows for the ops the config can change
(`trainer/config_rows.py`). Costs are counted in op copies
(`trainer.call_cost`); every scoring path (in-process, server, batch) runs
its examples through the model in groups within a budget, which is exact
(examples are scored independently), and a single example beyond the
budget is refused, never run whole.
"""

from typing import Callable, Iterator, Sequence

import numpy as np
import tensorflow as tf

from serving import options
from trainer import call_cost
from trainer import hparams


class NotAnExample(ValueError):
  """A request item is not a serialized tf.Example."""


class OverBudget(ValueError):
  """One example alone needs more than the call budget."""


def op_copies(serialized: bytes, join: str = hparams.JOINS[0]) -> float:
  """`call_cost.example_cost` of a serialized example."""
  try:
    feature = tf.train.Example.FromString(serialized).features.feature
  except Exception as e:  # pylint: disable=broad-except  (DecodeError)
    raise NotAnExample(f"not a serialized tf.Example ({e})") from e
  size = lambda name: sum(feature[name].int64_list.value) if (
      name in feature) else 0
  ops, configs = size("nodes/op.#size"), size("nodes/config.#size")
  if "nodes/node_config.#size" not in feature:
    return float(ops)
  per_config = size("nodes/node_config.#size") // max(configs, 1)
  return call_cost.example_cost(ops, configs, max(per_config, 1), join)


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
                    budget: int = options.MAX_OP_COPIES,
                    join: str = hparams.JOINS[0]):
  """`score(list of examples) -> (scores, config_index)`, called on groups
  within `budget`; returns the same as one call on all of them would
  ([n, K_max] each; padding: score 0, index -1).

  Raises:
    NotAnExample: an item is not a serialized tf.Example.
    OverBudget: one example alone exceeds `budget` (split its configs).
  """
  serialized = list(serialized)
  costs = [op_copies(s, join) for s in serialized]
  for i, cost in enumerate(costs):
    if cost > budget:
      raise OverBudget(
          f"example {i} needs {cost:.0f} op copies, over the call budget "
          f"of {budget}: send fewer configs per example")
  scores, index = [], []
  for part in groups(costs, budget):
    s, i = score(serialized[part])
    scores.append(s)
    index.append(i)
  return _stack(scores, 0.0), _stack(index, -1)
