"""How graphs become examples: the one home of every conversion default.

Importable without TensorFlow or Beam, so the CLI (whose `--help` shows
these values), the TFX pipeline, training and scoring all read them here.
"""

import dataclasses
import json
from typing import Optional

# Configs per train example, by kind. A train record holds a graph once
# with its sampled configs, cut by the input pipeline into examples of K in
# the record's (shuffled) order, so the ranking loss compares a config with
# its K - 1 chunk-mates. A late-join layout model shares work between the
# configs of an example (`trainer/config_rows`): 64 configs make a step
# ~2.4x as long as 16 and give the loss 16x the pairs; at equal training
# time (1 minute, 2 seeds, simulated small collections) the valid Kendall
# tau rose on
# layout:xla:random (0.877 -> 0.900) and held on layout:nlp:default
# (0.633 -> 0.638). An early-join model copies the graph per config:
# EARLY_JOIN_K.
K = {"tile": 16, "layout": 64}
EARLY_JOIN_K = 16
# Configs per valid/test/scoring example. Each example carries a copy of the
# (pruned) graph, so evaluation chunks are larger to keep the output small;
# the scorer still sees every config.
EVAL_K = 128
# Configs per example and examples per model call when one graph is ranked
# in process or through a model server (`tpurank rank`, `SavedModelScorer`),
# by the layout model's join (`trainer.hparams.JOINS`): a late-join model
# encodes the graph once per example, so one example carries many configs
# (fewer if the call budget needs it, `serving.call_budget`); an early-join
# model copies the graph per config.
RANK_K = {"late": 1024, "early": 64}
RANK_BATCH = {"late": 1, "early": 4}
# Hops kept around the layout regions (`prune.neighbourhood`): with whole
# regions, one hop adds the ops a config's cost reaches (operands, consumers
# outside the region) at about the size two hops around the configurable
# ops alone had.
DEFAULT_HOPS = 1
SEED = 0
# Train examples (chunks of K configs) kept per graph: bounds the configs
# sampled from graphs with many (K x this). Layout graphs keep up to 64
# chunks (1,024 configs at K=16, 4,096 at 64), which gives the ranking loss
# many more distinct pairs than 24 did (see benchmarks/results/quality.md).
MAX_EXAMPLES = {"tile": 8, "layout": 64}
HOPS_HELP = ("layout: keep the configurable ops, the elementwise chains their "
             "layouts spread to, and every op within this many hops of those "
             "(-1: whole graph)")


def train_k(kind: str, given: Optional[int] = None,
            join: str = "late") -> int:
  """Configs per train example: `given` if set, else the kind's (layout:
  the join's, "late" or "early")."""
  if given is not None:
    return given
  if kind == "layout" and join == "early":
    return EARLY_JOIN_K
  return K[kind]


def max_examples(kind: str, given: Optional[int] = None) -> Optional[int]:
  """Train examples per graph: `given` if set (0: all), else the kind's."""
  if given is None:
    return MAX_EXAMPLES[kind]
  return given or None


@dataclasses.dataclass(frozen=True)
class ConvertOptions:
  """How graphs become examples.

  Attributes:
    k: Configs per train example (None: the kind's, `train_k`).
    eval_k: Configs per valid/test example.
    hops: Layout: keep the configurable nodes' k-hop neighbourhood (-1: all).
    seed: Train config sampling seed.
    max_examples: At most this many examples per train graph (None: all).
  """
  k: Optional[int] = None
  eval_k: int = EVAL_K
  hops: int = DEFAULT_HOPS
  seed: int = SEED
  max_examples: Optional[int] = None

  def to_json(self) -> str:
    return json.dumps(dataclasses.asdict(self), sort_keys=True)

  @classmethod
  def from_json(cls, text: str) -> "ConvertOptions":
    return cls(**json.loads(text))
