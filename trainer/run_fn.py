"""The TFX Trainer entry point: `run_fn(fn_args)`.

`custom_config` carries `collection` (required) and optional `hparams`, a
dict of `TrainConfig` fields (e.g. {"max_minutes": 5, "loss": "softmax"}) and
`model`, a dict of `ModelConfig` fields. The SavedModel goes to
`fn_args.serving_model_dir` (the Pusher versions it); checkpoints, logs and
backups to `fn_args.model_run_dir`, TensorBoard logs where Vertex AI asks
(`AIP_TENSORBOARD_LOG_DIR`, set when the training job has a TensorBoard).

When TF_CONFIG names more than one worker (Vertex AI sets it on every replica
of a custom job with a chief pool and a worker pool: `cluster` has "chief"
and "worker"), training runs under MultiWorkerMirroredStrategy; every replica
runs this same function, and only the chief writes `serving_model_dir`.
"""

import os

from schemas import npz_format
from trainer import distribute
from trainer import hparams
from trainer import input_fn
from trainer import train as train_lib

# Where Vertex AI's training service wants TensorBoard logs.
VERTEX_TENSORBOARD_ENV = "AIP_TENSORBOARD_LOG_DIR"


def config_from_fn_args(fn_args) -> hparams.TrainConfig:
  """The TrainConfig of a TFX Trainer invocation."""
  custom = dict(fn_args.custom_config or {})
  if "collection" not in custom:
    raise ValueError("custom_config must name the collection, e.g. "
                     "{'collection': 'layout:xla:random'}")
  collection = custom["collection"]
  train_args = dict(custom.get("hparams", {}))
  if fn_args.train_steps:
    train_args.setdefault("steps_per_epoch", int(fn_args.train_steps))
  # A TPU job's hosts are TPUStrategy's (its cluster resolver), not MWMS's.
  if not train_args.get("tpu") and distribute.training_workers() > 1:
    train_args["multi_worker"] = True
  model = hparams.ModelConfig(kind=npz_format.collection_kind(collection),
                              **custom.get("model", {}))
  return hparams.TrainConfig(
      collection=collection,
      train_files=input_fn.list_record_files(fn_args.train_files),
      valid_files=input_fn.list_record_files(fn_args.eval_files),
      out_dir=fn_args.model_run_dir,
      log_dir=os.environ.get(VERTEX_TENSORBOARD_ENV) or None,
      export_path=fn_args.serving_model_dir,
      model=model, **train_args)


def run_fn(fn_args):
  """Trains and exports; called by the TFX Trainer's GenericExecutor."""
  cfg = config_from_fn_args(fn_args)
  # Made first: a multi-worker strategy must exist before any TensorFlow op.
  strategy = distribute.pick_strategy(cfg.tpu, cfg.mirrored, cfg.multi_worker)
  return train_lib.train(cfg, strategy)
