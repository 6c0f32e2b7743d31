"""`tpurank train`: trains a config ranker on a TpuGraphs collection."""

import json
import os

from conversion import options
from schemas import npz_format
from schemas.errors import fail
from serving import model_repository
from tpurank.commands import common
from trainer import hparams

_MODEL = hparams.ModelConfig(kind="layout")  # Kind-independent defaults.
_TRAIN = hparams.TrainConfig  # Its class attributes hold the defaults.


def add_parser(sub):
  p = sub.add_parser(
      "train", help="train a GNN config ranker on a collection",
      description="Converts the collection's train/valid splits to GraphTensor "
      "records (under OUT/records), trains with early stopping on the "
      "validation ranking metric, and exports a SavedModel to OUT/export/"
      "<version>/. Re-running with the same OUT resumes an interrupted run.")
  p.add_argument("--collection", required=True, choices=npz_format.COLLECTIONS)
  p.add_argument("--data", required=True,
                 help="directory holding npz/... (as `tpurank synth` writes)")
  p.add_argument("--out", required=True, help="output directory")
  p.add_argument("--gnn", choices=[g for g in hparams.GNNS if g != "none"],
                 default=_MODEL.gnn)
  p.add_argument("--join", choices=hparams.JOINS, default=_MODEL.join,
                 help="layout: 'late' runs message passing once per graph "
                 "and scores each config on the ops it can change; "
                 "'early' copies the graph per config (slower, the former "
                 "model)")
  p.add_argument("--config-only", action="store_true",
                 help="baseline: score configs from their features alone")
  p.add_argument("--loss", default=_TRAIN.loss, choices=hparams.LOSSES)
  p.add_argument("--batch-size", type=int, default=None,
                 help="graphs per step (default: tile {tile}, layout "
                 "{layout})".format(**hparams.BATCH_SIZE))
  p.add_argument("--hidden", type=int, default=_MODEL.hidden)
  p.add_argument("--layers", type=int, default=_MODEL.layers)
  common.add_conversion_flags(p)
  p.add_argument("--learning-rate", type=float, default=_TRAIN.learning_rate)
  p.add_argument("--lr-decay", choices=hparams.LR_DECAYS,
                 default=_TRAIN.lr_decay,
                 help="cosine: decay the rate to {:.0%} of it over the run (its "
                 "epochs or --max-minutes, whichever ends first); constant: "
                 "keep it, unless --lr-patience lowers it".format(
                     hparams.LR_FLOOR).replace("%", "%%"))
  p.add_argument("--lr-patience", type=int, default=_TRAIN.lr_patience,
                 help="with --lr-decay constant: halve the learning rate "
                 "after this many epochs without validation gain (0: off)")
  p.add_argument("--dropout", type=float, default=_MODEL.dropout,
                 help="dropout in message passing and the readout MLP")
  p.add_argument("--epochs", type=int, default=_TRAIN.epochs)
  p.add_argument("--steps-per-epoch", type=int, default=_TRAIN.steps_per_epoch,
                 help="0: one pass over the train examples")
  p.add_argument("--train-seed", type=int, default=None,
                 help="seed of initialisation and data order (default: "
                 "--seed, which also samples the records' configs): "
                 "several runs on the same records differ only in this")
  p.add_argument("--max-minutes", type=float, default=_TRAIN.max_minutes,
                 help="training time budget (wall clock)")
  p.add_argument("--patience", type=int, default=_TRAIN.patience,
                 help="epochs without validation gain before stopping")
  p.add_argument("--xla", dest="xla", action="store_const", const=True,
                 default=None,
                 help="compile the padded step with XLA (default: on for "
                 "tile and --join early, off for --join late, whose row "
                 "pooling XLA's CPU scatters slow down; a TPU always "
                 "compiles)")
  p.add_argument("--no-xla", dest="xla", action="store_const", const=False,
                 help="no padding, no XLA (dynamic shapes; not for TPUs)")
  p.add_argument("--tpu", default=None,
                 help="TPU name/address for TPUClusterResolver")
  p.add_argument("--mirrored", action="store_true",
                 help="MirroredStrategy over all local devices")
  p.add_argument("--multi-worker", action="store_true",
                 help="MultiWorkerMirroredStrategy: run this same command on "
                 "every worker, each with the standard TF_CONFIG naming the "
                 "cluster and its own task; --out must be one directory all "
                 "workers see (the chief writes the export, every worker "
                 "resumes from the chief's backup)")
  p.add_argument("--no-export", action="store_true",
                 help="skip the SavedModel export (sweeps, benchmarks): "
                 "summary.json still has the validation metrics")


def run(args) -> int:
  # Loaded when the command runs, not at start-up: keeps the CLI fast.
  # pylint: disable=g-import-not-at-top
  from conversion import records
  from trainer import distribute
  from trainer import train as train_lib
  if args.lr_patience and args.lr_decay != "constant":
    raise fail("<command line>", "--lr-patience",
               "--lr-decay constant with it (the cosine decay sets the rate)",
               f"--lr-decay {args.lr_decay}")
  if args.multi_worker and (args.tpu or args.mirrored):
    raise fail("<command line>", "--multi-worker",
               "no --tpu or --mirrored with it", "--tpu" if args.tpu else
               "--mirrored")
  strategy = sync = None
  if args.multi_worker:
    # Before conversion: the strategy must exist before TensorFlow runs an
    # op. The chief converts first; the others then find its records (one
    # shared --out) or convert their own (the same, from the same seed).
    strategy = distribute.pick_strategy(multi_worker=True)
    sync = distribute.ChiefValues(strategy)
    if not distribute.is_chief(strategy):
      sync.barrier()
  kind = npz_format.collection_kind(args.collection)
  max_examples = options.max_examples(kind, args.max_examples)
  k = options.train_k(kind, args.k, args.join)
  base = os.path.join(args.out, "export")
  rec_dir = os.path.join(args.out, "records")
  files = {}
  for split in ("train", "valid"):
    path = os.path.join(rec_dir, f"{split}.tfrecord.gz")
    counts = records.ensure_split(args.data, args.collection, split, path,
                                  k, args.hops, args.seed, max_examples)
    if counts is None:
      print(f"{split}: reusing {path} (same data and options)")
    else:
      # Train records hold a graph each, cut into examples of K in training.
      print(f"{split}: {counts['graphs']} graphs, {counts['examples']} "
            f"records -> {path}")
      for line in counts["skipped"]:
        print(f"skipped: {line}")
    files[split] = [path]
  if sync is not None and distribute.is_chief(strategy):
    sync.barrier()
  cfg = hparams.TrainConfig(
      collection=args.collection, train_files=files["train"],
      valid_files=files["valid"], out_dir=args.out,
      model=hparams.ModelConfig(
          kind=kind, gnn="none" if args.config_only else args.gnn,
          hidden=args.hidden, layers=args.layers, dropout=args.dropout,
          config_only=args.config_only, join=args.join),
      loss=args.loss, k=k, batch_size=args.batch_size or 0,
      learning_rate=args.learning_rate, lr_decay=args.lr_decay,
      lr_patience=args.lr_patience,
      epochs=args.epochs,
      steps_per_epoch=args.steps_per_epoch, max_minutes=args.max_minutes,
      patience=args.patience, xla=args.xla,
      seed=args.seed if args.train_seed is None else args.train_seed,
      tpu=args.tpu, mirrored=args.mirrored, multi_worker=args.multi_worker,
      export=not args.no_export,
      export_path=os.path.join(base, str(model_repository.next_version(base))),
      hops=args.hops)
  summary = train_lib.train(cfg, strategy)
  print(json.dumps(summary, indent=2, default=float))
  return 0
