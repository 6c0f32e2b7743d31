"""`create_pipeline`: the one tpurank TFX pipeline every runner runs.

    TpuGraphsExampleGen -> Trainer -> RankingEvaluator -> Pusher
                                           ^
               LatestBlessedModel resolver (baseline)

ExampleGen converts the collection's own train/valid splits with Beam;
the Trainer calls `trainer.run_fn.run_fn`; the evaluator scores all configs
of every validation graph with the exported SavedModel and blesses it; the
Pusher copies a blessed model to `<serving_dir>/<version>/`.
"""

import dataclasses
import os
from typing import Optional, Sequence

from tfx import v1 as tfx

from conversion import options
from pipeline import configs
from pipeline import example_gen
from pipeline import ranking_evaluator
from schemas import npz_format

RUN_FN = "trainer.run_fn.run_fn"


def convert_options(kind: str, overrides: Optional[dict] = None
                    ) -> options.ConvertOptions:
  """The defaults of `conversion.options` for `kind`, then `overrides`."""
  return options.ConvertOptions(**dict(
      {"max_examples": options.max_examples(kind)}, **(overrides or {})))


def create_pipeline(pipeline_name: str, pipeline_root: str, data_dir: str,
                    collection: str, serving_dir: str,
                    train_hparams: Optional[dict] = None,
                    model_config: Optional[dict] = None,
                    conversion: Optional[dict] = None,
                    threshold: Optional[float] = None,
                    dead_letter_dir: str = "",
                    allow_dead_letters: bool = False,
                    metadata_connection_config=None,
                    beam_pipeline_args: Sequence[str] = (),
                    vertex: Optional[dict] = None,
                    enable_cache: bool = True) -> tfx.dsl.Pipeline:
  """Builds the pipeline.

  Args:
    pipeline_name: Name (MLMD context).
    pipeline_root: Where the components' artifacts go.
    data_dir: Directory holding npz/<collection path>/{train,valid}/.
    collection: e.g. "layout:xla:random".
    serving_dir: The Pusher's base directory (versions go under it).
    train_hparams: TrainConfig fields (default: its own defaults).
    model_config: ModelConfig fields (e.g. {"gnn": "gatv2"}).
    conversion: ConvertOptions overrides.
    threshold: Blessing threshold (default configs.THRESHOLDS[kind]).
    dead_letter_dir: Where ExampleGen writes bad files' reasons.
    allow_dead_letters: Let ExampleGen succeed despite bad files.
    metadata_connection_config: MLMD connection (None on Vertex).
    beam_pipeline_args: Beam options of ExampleGen (and other Beam steps).
    vertex: {"project", "region", "image", "tpu", optional "workers",
      "tpu_topology"} (see `configs.vertex_training_args`): run the Trainer
      as a Vertex AI custom job; None trains in the pipeline's own worker.
    enable_cache: Reuse results of unchanged steps.
  """
  kind = npz_format.collection_kind(collection)
  conversion_options = convert_options(kind, conversion)
  # Train examples of the configs the model's join trains on.
  join = {k: v for k, v in (model_config or {}).items() if k == "join"}
  conversion_options = dataclasses.replace(
      conversion_options, k=options.train_k(kind, conversion_options.k,
                                            **join))
  gen = example_gen.TpuGraphsExampleGen(
      data_dir, collection, conversion_options,
      dead_letter_dir=dead_letter_dir, allow_dead_letters=allow_dead_letters)
  # The trainer records how its examples were made.
  train_args = dict(train_hparams or {})
  train_args.setdefault("hops", conversion_options.hops)
  train_args.setdefault("k", conversion_options.k)
  custom_config = {"collection": collection,
                   "hparams": train_args,
                   "model": dict(model_config or {})}
  trainer_args = dict(
      run_fn=RUN_FN, examples=gen.outputs["examples"],
      train_args=tfx.proto.TrainArgs(splits=["train"]),
      eval_args=tfx.proto.EvalArgs(splits=["valid"]))
  if vertex:
    tpu = bool(vertex.get("tpu") or vertex.get("tpu_topology"))
    if tpu:
      custom_config["hparams"]["tpu"] = "local"
    custom_config.update({
        tfx.extensions.google_cloud_ai_platform.ENABLE_VERTEX_KEY: True,
        tfx.extensions.google_cloud_ai_platform.VERTEX_REGION_KEY:
            vertex["region"],
        tfx.extensions.google_cloud_ai_platform.TRAINING_ARGS_KEY:
            configs.vertex_training_args(
                vertex["project"], vertex["image"], tpu,
                workers=int(vertex.get("workers") or 1),
                tpu_topology=vertex.get("tpu_topology"))})
    trainer = tfx.extensions.google_cloud_ai_platform.Trainer(
        custom_config=custom_config, **trainer_args)
  else:
    trainer = tfx.components.Trainer(custom_config=custom_config,
                                     **trainer_args)
  baseline = tfx.dsl.Resolver(
      strategy_class=tfx.dsl.experimental.LatestBlessedModelStrategy,
      model=tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model),
      model_blessing=tfx.dsl.Channel(
          type=tfx.types.standard_artifacts.ModelBlessing),
  ).with_id("latest_blessed_model_resolver")
  evaluator = ranking_evaluator.RankingEvaluator(
      examples=gen.outputs["examples"], model=trainer.outputs["model"],
      baseline_model=baseline.outputs["model"], collection=collection,
      threshold=float(configs.THRESHOLDS[kind] if threshold is None
                      else threshold))
  pusher = tfx.components.Pusher(
      model=trainer.outputs["model"],
      model_blessing=evaluator.outputs["blessing"],
      push_destination=tfx.proto.PushDestination(
          filesystem=tfx.proto.PushDestination.Filesystem(
              base_directory=serving_dir)))
  return tfx.dsl.Pipeline(
      pipeline_name=pipeline_name, pipeline_root=pipeline_root,
      components=[gen, trainer, baseline, evaluator, pusher],
      enable_cache=enable_cache,
      metadata_connection_config=metadata_connection_config,
      beam_pipeline_args=list(beam_pipeline_args))


def local_paths(work_dir: str) -> dict:
  """Default locations of a local run under one working directory."""
  return {"pipeline_root": os.path.join(work_dir, "pipeline_root"),
          "metadata": os.path.join(work_dir, "metadata.sqlite"),
          "serving_dir": os.path.join(work_dir, "serving",
                                      configs.MODEL_NAME),
          "dead_letter_dir": os.path.join(work_dir, "dead_letters")}
