"""Hyper-parameters of the model and of training: the one home of defaults.

Importable without TensorFlow, so the CLI (whose `--help` shows these
values), the TFX pipeline and the trainer read the same ones.
"""

import dataclasses
from typing import Optional, Sequence

from conversion import options
from schemas import npz_format

# Message passing ("none": no graph, with `config_only`, the baseline).
GNNS = ("sage", "gatv2", "mtalbis", "none")
# How a layout model joins a config to its graph (first: the default).
# "late": the graph's message passing runs once per graph and each config
# only on the ops it can change (`trainer/config_rows.py`); "early": a
# copy of the graph per config, message passing over every copy.
JOINS = ("late", "early")
# TF-Ranking losses by name (first: the default); `train.LOSSES` maps them.
LOSSES = ("listmle", "pairwise_hinge", "approx_ndcg", "softmax")
# Graphs per step by kind.
BATCH_SIZE = {"tile": 16, "layout": 4}


@dataclasses.dataclass
class ModelConfig:
  """Hyperparameters of the model."""
  kind: str  # "tile" or "layout"
  gnn: str = "sage"
  hidden: int = 64
  layers: int = 3
  opcode_dim: int = 16
  heads: int = 4
  dropout: float = 0.0
  config_only: bool = False
  join: str = JOINS[0]  # Layout only (see JOINS).

  def __post_init__(self):
    if self.join not in JOINS:
      raise ValueError(f"unknown join {self.join!r}; expected one of {JOINS}")


LR_DECAYS = ("cosine", "constant")
LR_FLOOR = 0.05  # Cosine decay ends at this fraction of the rate.


@dataclasses.dataclass
class TrainConfig:
  """Everything one training run needs."""
  collection: str
  train_files: Sequence[str]
  valid_files: Sequence[str]
  out_dir: str
  model: Optional[ModelConfig] = None
  # TensorBoard logs (None: out_dir/logs). On Vertex AI, the run_fn sets
  # AIP_TENSORBOARD_LOG_DIR here when the job has a TensorBoard.
  log_dir: Optional[str] = None
  loss: str = LOSSES[0]
  k: Optional[int] = None  # None: by kind and join (`options.train_k`).
  batch_size: int = 0  # 0: by kind (BATCH_SIZE).
  learning_rate: float = 2e-3
  # "cosine": decay to LR_FLOOR of the rate over the run (see
  # CosineBudgetDecay); "constant": keep it (and lr_patience, if set).
  lr_decay: str = "cosine"
  lr_patience: int = 0  # Halve the rate after this many flat epochs; 0: off.
  epochs: int = 100  # At most; early stopping and the budget end sooner.
  steps_per_epoch: int = 0  # 0: one pass over the train examples.
  max_minutes: float = 10.0
  # Epochs without validation gain before stopping (the best epoch's
  # weights are kept). On small collections an epoch is ~20 steps and a
  # second, and validation tau on a few graphs wobbles: after 6 epochs,
  # nlp:default runs stopped within 30 s of their 10 minutes, 0.006 tau
  # lower than after 20 (40 gave no more).
  patience: int = 20
  # Compile the padded step with XLA. None: on for tile and early-join
  # layout models, off for the late join (XLA's CPU scatters make its row
  # pooling 4-15x slower, measured when the late join landed); a TPU
  # always compiles.
  xla: Optional[bool] = None
  seed: int = options.SEED
  tpu: Optional[str] = None
  mirrored: bool = False
  # MultiWorkerMirroredStrategy over the workers of TF_CONFIG
  # (`distribute.pick_strategy`).
  multi_worker: bool = False
  # The SavedModel directory (e.g. <base>/<version>; the caller numbers it).
  export_path: Optional[str] = None
  export: bool = True  # False: metrics only (sweeps, benchmarks).
  hops: Optional[int] = None  # Layout pruning of the records (metadata).
  # Keras's own progress output (model.fit verbose); 0: off, tpurank prints
  # one line per epoch (`train.ValidationCallback`).
  verbose: int = 0

  def __post_init__(self):
    kind = npz_format.collection_kind(self.collection)
    if self.model is None:
      self.model = ModelConfig(kind=kind)
    if not self.batch_size:
      self.batch_size = BATCH_SIZE[kind]
    self.k = options.train_k(kind, self.k, self.model.join)
    if self.xla is None:
      self.xla = kind == "tile" or self.model.join == "early"
    if self.lr_decay not in LR_DECAYS:
      raise ValueError(f"unknown lr_decay {self.lr_decay!r}; expected one "
                       f"of {LR_DECAYS}")
    if self.export and not self.export_path:
      raise ValueError("export needs export_path (or export=False)")
    if self.lr_patience and self.lr_decay != "constant":
      raise ValueError("lr_patience needs lr_decay='constant'")
    if self.loss not in LOSSES:
      raise ValueError(f"unknown loss {self.loss!r}; expected one of "
                       f"{LOSSES}")

  @property
  def kind(self) -> str:
    return self.model.kind


