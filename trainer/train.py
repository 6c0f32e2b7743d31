"""Training: strategy, padded XLA train step, validation, early stop, export.

`train(hparams.TrainConfig)` is shared by `tpurank train` and the TFX `run_fn`:

* the strategy comes from `distribute.pick_strategy`; each replica reads its
  own batches (`distribute_datasets_from_function`); on several workers
  (`MultiWorkerMirroredStrategy`) each reads its own share of the examples
  (`input_fn.shard_policy`), the time budget runs on the chief's clock and
  the validation metrics are the chief's (`distribute.ChiefValues`), so all
  workers stop at the same step; only the chief writes the run's files and
  the export (the others write theirs under `workertemp_*` and delete them);
* batches are padded to fixed totals (`tfgnn.pad_to_total_sizes`) and the
  step is compiled with XLA, as TPUs require (`xla=False` skips both; by
  default off for the late join on CPU, see `hparams.TrainConfig.xla`);
* after every epoch all configs of every validation graph are scored and the
  ranking metrics logged (TensorBoard, history); training stops early when the
  primary metric (layout: Kendall tau, tile: top-5 error) stops improving or
  the time budget runs out, and the best weights are kept;
* the learning rate decays on a cosine over the run (`CosineBudgetDecay`);
* `BackupAndRestore` lets an interrupted run resume where it stopped (on
  several workers: from the chief's backup, after any worker was lost);
* the best model is exported in TF Serving's layout.
"""

import dataclasses
import json
import math
import os
import time
from typing import Optional

import tensorflow as tf
import tensorflow_ranking as tfr

from trainer import default_guard
from trainer import distribute
from trainer import evaluate
from trainer import export
from trainer import feature_stats
from trainer import hparams
from trainer import input_fn
from trainer import learned_propagation
from trainer import learned_tiling
from trainer import metrics
from trainer import model as model_lib

# The TF-Ranking loss of each name in `hparams.LOSSES`.
LOSSES = {
    "listmle": tfr.keras.losses.ListMLELoss,
    "pairwise_hinge": tfr.keras.losses.PairwiseHingeLoss,
    "approx_ndcg": tfr.keras.losses.ApproxNDCGLoss,
    "softmax": tfr.keras.losses.SoftmaxLoss,
}


class ThroughputCallback(tf.keras.callbacks.Callback):
  """Times the train steps alone (not validation, not the first step,
  which traces and compiles), for examples/s.

  Init args:
    examples_per_step: Graphs (examples) per global batch.
  """

  def __init__(self, examples_per_step: int):
    super().__init__()
    self._per_step = examples_per_step
    self.steps, self.seconds = 0, 0.0
    self._start = None
    self._seen_first = False

  def on_train_batch_begin(self, batch, logs=None):
    self._start = time.perf_counter()

  def on_train_batch_end(self, batch, logs=None):
    if self._seen_first:
      self.steps += 1
      self.seconds += time.perf_counter() - self._start
    self._seen_first = True

  def summary(self) -> dict:
    return {"timed_steps": self.steps, "step_seconds": self.seconds,
            "examples_per_second": (self.steps * self._per_step /
                                    self.seconds if self.seconds else None)}


class SharedClock(tf.keras.callbacks.Callback):
  """Seconds since training began, by the chief's clock, read before every
  step: on several workers, the budget then ends training at the same step
  everywhere and the learning rate is the same on every worker (one small
  all-reduce per step; none on one worker).

  Init args:
    sync: `distribute.ChiefValues` of the strategy.
  """

  def __init__(self, sync: distribute.ChiefValues):
    super().__init__()
    self._sync = sync
    self._start = time.time()
    self.seconds = 0.0

  def refresh(self) -> float:
    """Reads the (chief's) clock; every worker must call it at the same
    point (callbacks run in the same order on all)."""
    self.seconds = self._sync([time.time() - self._start])[0]
    return self.seconds

  def on_train_begin(self, logs=None):
    self._start = time.time()
    self.seconds = 0.0

  def on_train_batch_begin(self, batch, logs=None):
    self.refresh()


class CosineBudgetDecay(tf.keras.callbacks.Callback):
  """Cosine decay of the learning rate over the run, set before every step.

  A run ends at its step limit or its time budget, whichever comes first,
  so progress is the larger of the two fractions done. Ending on a low rate
  settles the weights (validation jumps less from epoch to epoch), and the
  high rate early on still covers ground. A resumed run restarts the decay.

  Init args:
    rate: The initial learning rate.
    total_steps: Steps the run may take at most.
    max_minutes: The run's time budget.
    clock: The run's `SharedClock` (listed before this callback).
  """

  def __init__(self, rate: float, total_steps: int, max_minutes: float,
               clock: SharedClock):
    super().__init__()
    self._rate, self._total = rate, max(1, total_steps)
    self._seconds = 60 * max_minutes
    self._clock, self._step = clock, 0

  def progress(self) -> float:
    return min(1.0, max(self._step / self._total,
                        self._clock.seconds / self._seconds))

  def on_train_batch_begin(self, batch, logs=None):
    cosine = 0.5 * (1 + math.cos(math.pi * self.progress()))
    rate = self._rate * (hparams.LR_FLOOR + (1 - hparams.LR_FLOOR) * cosine)
    tf.keras.backend.set_value(self.model.optimizer.learning_rate, rate)
    self._step += 1

  def on_epoch_end(self, epoch, logs=None):
    if logs is not None:
      logs["lr"] = float(tf.keras.backend.get_value(
          self.model.optimizer.learning_rate))


class ValidationCallback(tf.keras.callbacks.Callback):
  """Scores all validation configs each epoch; keeps the best weights.

  Init args:
    score_model: The model to evaluate.
    kind: "tile" or "layout".
    files: Validation records.
    log_dir: TensorBoard directory for the validation metrics.
    max_minutes: Stop training once this much wall time has passed.
    clock: The run's `SharedClock` (listed before this callback).
    sync: `distribute.ChiefValues`: every worker takes the chief's metrics,
      so early stopping and the best epoch are the same on all.
    join: The layout model's join (`hparams.JOINS`).
  """

  def __init__(self, score_model, kind, files, log_dir, max_minutes, clock,
               sync, join=hparams.JOINS[0]):
    super().__init__()
    self._score_model, self._kind, self._files = score_model, kind, files
    self._scorer = evaluate.RecordScorer(score_model, kind, join=join)
    self._metric, self._mode = metrics.PRIMARY[kind]
    self._writer = tf.summary.create_file_writer(log_dir)
    self._budget = 60 * max_minutes
    self._clock, self._sync = clock, sync
    self.best = None
    self.best_epoch = None
    self.best_weights = None
    self.best_metrics = None

  def _better(self, value):
    if self.best is None:
      return True
    return value > self.best if self._mode == "max" else value < self.best

  def on_train_batch_end(self, batch, logs=None):
    # The budget ends the epoch early (small budgets, long epochs); the
    # epoch's validation still runs.
    if self._clock.seconds > self._budget:
      self.model.stop_training = True

  def on_epoch_begin(self, epoch, logs=None):
    self._epoch_start = time.time()

  def on_epoch_end(self, epoch, logs=None):
    seconds = time.time() - getattr(self, "_epoch_start", time.time())
    loss = (logs or {}).get("loss")
    result, _ = evaluate.metrics_of(self._kind, self._scorer(self._files))
    # Every worker scored the same weights on the same files: the same keys.
    names = sorted(result)
    result = dict(zip(names, self._sync([result[k] for k in names])))
    if "graphs" in result:
      result["graphs"] = int(result["graphs"])
    with self._writer.as_default():
      for name, value in result.items():
        tf.summary.scalar(f"val_{name}", value, step=epoch)
    if logs is not None:
      logs.update({f"val_{k}": v for k, v in result.items()})
    value = result.get(self._metric, float("nan"))
    if not math.isnan(value) and self._better(value):
      self.best, self.best_epoch = value, epoch
      self.best_weights = self._score_model.get_weights()
      self.best_metrics = result
    best = ("none yet" if self.best is None else
            f"best {self.best:.4f} at epoch {self.best_epoch + 1}")
    shown = ", ".join(f"{k} {v:.4f}" for k, v in result.items()
                      if k != "graphs")
    trained = "" if loss is None else f"loss {loss:.4f}, "
    print(f"epoch {epoch + 1}: {trained}val {shown} ({best}; {seconds:.0f} s)",
          flush=True)
    if self._clock.refresh() > self._budget:
      print("time budget reached: stopping", flush=True)
      self.model.stop_training = True

  def on_train_end(self, logs=None):
    if self.best_weights is not None:
      self._score_model.set_weights(self.best_weights)


def _log_dir(cfg: hparams.TrainConfig) -> str:
  return cfg.log_dir or os.path.join(cfg.out_dir, "logs")


def _calibrate_guard(score_model, valid_files, join) -> dict:
  """The tile model's default-guard margin, calibrated on validation, with
  the guarded ranking's validation metrics beside it."""
  predictions = evaluate.RecordScorer(score_model, "tile",
                                      join=join)(valid_files)
  guard = default_guard.calibrate(predictions)
  guard["valid_metrics"] = default_guard.guarded_metrics(
      predictions, guard["margin"])[0]
  return guard


def train(cfg: hparams.TrainConfig,
          strategy: Optional[tf.distribute.Strategy] = None) -> dict:
  """Trains, validates, exports. Returns a summary (also in summary.json).

  Args:
    cfg: The run.
    strategy: The strategy, if the caller made it (a multi-worker strategy
      must exist before TensorFlow runs any op); None: picked here from
      `cfg` (`distribute.pick_strategy`).
  """
  if strategy is None:
    strategy = distribute.pick_strategy(cfg.tpu, cfg.mirrored,
                                        cfg.multi_worker)
  tf.keras.utils.set_random_seed(cfg.seed)
  os.makedirs(cfg.out_dir, exist_ok=True)
  kind = cfg.kind
  replicas = strategy.num_replicas_in_sync
  workers = distribute.worker_count(strategy)
  sync = distribute.ChiefValues(strategy)
  # Non-chief workers keep their files apart, deleted at the end.
  work_dir = distribute.write_dir(cfg.out_dir, strategy)
  os.makedirs(work_dir, exist_ok=True)
  per_replica = max(1, cfg.batch_size // replicas)
  stats = feature_stats.compute(cfg.train_files, kind)
  join = cfg.model.join
  num_examples, biggest = input_fn.scan_examples(cfg.train_files, kind,
                                                 cfg.k, join)
  constraints = (input_fn.constraints_for(biggest, per_replica)
                 if cfg.xla or cfg.tpu else None)
  steps = cfg.steps_per_epoch or max(1, num_examples // (per_replica *
                                                         replicas))

  def dataset_fn(ctx=None):
    seed = cfg.seed + (ctx.input_pipeline_id if ctx else 0)
    shard = ((ctx.num_input_pipelines, ctx.input_pipeline_id)
             if ctx and ctx.num_input_pipelines > 1 else None)
    return input_fn.train_dataset(cfg.train_files, kind, per_replica, cfg.k,
                                  seed=seed, size_constraints=constraints,
                                  join=join, shard=shard)

  distributed = replicas > 1 or bool(cfg.tpu) or workers > 1
  # Built once and reused by fit: building traces parsing and expansion.
  local_data = None if distributed else dataset_fn()
  sample_graph, _ = next(iter(
      dataset_fn() if local_data is None else local_data))
  # On several workers the step's cross-worker collectives (e.g.
  # CollectiveGatherV2) have no XLA CPU kernel: the step runs uncompiled
  # there (still padded to the same static sizes).
  jit = bool(cfg.xla or cfg.tpu) and workers == 1
  with strategy.scope():
    score_model = model_lib.build_score_model(cfg.model, sample_graph.spec,
                                              stats)
    ranker = model_lib.RankingModel(score_model, per_replica, cfg.k)
    ranker.compile(
        optimizer=tf.keras.optimizers.Adam(cfg.learning_rate),
        loss=LOSSES[cfg.loss](),
        metrics=[tfr.keras.metrics.OPAMetric(name="opa")],
        jit_compile=jit)
  data = (strategy.distribute_datasets_from_function(dataset_fn)
          if distributed else local_data)
  clock = SharedClock(sync)
  val = ValidationCallback(
      score_model, kind, cfg.valid_files,
      distribute.write_dir(os.path.join(_log_dir(cfg), "validation"),
                           strategy),
      cfg.max_minutes, clock, sync, join)
  metric, mode = metrics.PRIMARY[kind]
  throughput = ThroughputCallback(per_replica * replicas)
  callbacks = [
      clock,  # First: the others read the clock it set for the step.
      throughput,
      # On several workers all restore the chief's backup (`<dir>/chief`).
      tf.keras.callbacks.BackupAndRestore(os.path.join(cfg.out_dir,
                                                       "backup")),
      val,
      tf.keras.callbacks.EarlyStopping(monitor=f"val_{metric}", mode=mode,
                                       patience=cfg.patience),
  ]
  if cfg.lr_decay == "cosine":
    callbacks.append(CosineBudgetDecay(cfg.learning_rate,
                                       cfg.epochs * steps, cfg.max_minutes,
                                       clock))
  elif cfg.lr_patience:
    # After `val`, which puts the metric into the epoch's logs.
    callbacks.append(tf.keras.callbacks.ReduceLROnPlateau(
        monitor=f"val_{metric}", mode=mode, factor=0.5,
        patience=cfg.lr_patience, min_lr=cfg.learning_rate / 16))
  callbacks += [
      # Keras's TensorBoard keeps non-chief workers' logs apart itself.
      tf.keras.callbacks.TensorBoard(_log_dir(cfg)),
      tf.keras.callbacks.CSVLogger(os.path.join(work_dir, "history.csv"),
                                   append=True),
  ]
  start = time.time()
  ranker.fit(data, epochs=cfg.epochs, steps_per_epoch=steps,
             callbacks=callbacks, verbose=cfg.verbose)
  seconds = time.time() - start
  final = val.best_metrics or evaluate.evaluate(
      score_model, kind, cfg.valid_files, join=join)[0]
  metadata = {
      "collection": cfg.collection, "k": cfg.k, "loss": cfg.loss,
      "model": dataclasses.asdict(cfg.model), "valid_metrics": final,
      "feature_stats": stats.to_json(),
      "hops": cfg.hops,
      "learned_tiling": learned_tiling.learned(score_model),
      "learned_propagation": learned_propagation.learned(score_model),
      "note": "trained on the data it was given; on tpurank synth data the "
              "runtimes are simulated",
  }
  guard = (_calibrate_guard(score_model, cfg.valid_files, join)
           if kind == "tile" else None)
  if guard is not None:
    metadata[default_guard.METADATA_KEY] = guard
  path = None
  if cfg.export:
    # Every worker saves (saving may read variables collectively); only
    # the chief's copy is the export.
    path = export.save(score_model, kind, cfg.export_path
                       if distribute.is_chief(strategy) else
                       os.path.join(work_dir, "export"), metadata, join)
    path = cfg.export_path
  summary = {"collection": cfg.collection, "valid_metrics": final,
             "best_epoch": None if val.best_epoch is None else
             val.best_epoch + 1, "train_seconds": seconds,
             "train_examples": num_examples, "steps_per_epoch": steps,
             "replicas": replicas, "workers": workers, "xla": jit,
             "export": path,
             "default_guard": guard,
             "learned_tiling": metadata["learned_tiling"],
             "learned_propagation": metadata["learned_propagation"],
             **throughput.summary()}
  with open(os.path.join(work_dir, "summary.json"), "w") as f:
    json.dump(summary, f, indent=2, default=float)
  # No worker returns before the chief's export is complete (the TFX
  # executor of every worker checks that the model is there).
  sync.barrier()
  distribute.remove_write_dir(cfg.out_dir, strategy)
  distribute.remove_write_dir(os.path.join(_log_dir(cfg), "validation"),
                              strategy)
  return summary
