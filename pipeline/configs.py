"""Settings of the tpurank TFX pipeline, shared by every runner.

Values a user changes per run (data, collection, where things go) come in
through `tpurank pipeline ...` flags; the defaults live here.
"""

from serving import options as serving_options

PIPELINE_NAME = "tpurank"
MODEL_NAME = serving_options.MODEL_NAME  # <serving base>/<MODEL_NAME>/<v>/.

# Conversion and training defaults are not repeated here: ExampleGen takes
# `conversion.options` (layout keeps up to 64 chunks of K configs per train
# graph) and the Trainer `trainer.hparams.TrainConfig`, as the CLI does.

# Blessing: the primary metric must clear this (layout: Kendall tau at least,
# tile: top-5 error at most) and be no worse than the last blessed model's.
THRESHOLDS = {"layout": 0.2, "tile": 0.5}


def dataflow_args(project: str, region: str, bucket: str,
                  image: str) -> list[str]:
  """Default Beam flags of the Vertex pipeline's Beam steps: Dataflow,
  whose workers run tpurank's image (the `Dockerfile`, `make image`) as a
  custom SDK container, so they have the project's code and exactly its
  locked dependencies. User flags replace only themselves
  (`conversion.beam_args.merge`)."""
  return ["--runner=DataflowRunner", f"--project={project}",
          f"--region={region}", f"--temp_location={bucket}/tmp",
          f"--sdk_container_image={image}",
          # The image holds the SDK: nothing to stage.
          "--sdk_location=container"]


# Vertex AI: the Trainer runs as a Vertex custom job. A TPU worker pool is an
# option (`--tpu`); the trainer then resolves the TPU with
# TPUClusterResolver("local") and trains under TPUStrategy.
VERTEX_MACHINE_TYPE = "n1-standard-8"
VERTEX_TPU_MACHINE = {"machine_type": "cloud-tpu",
                      "accelerator_type": "TPU_V3", "accelerator_count": 8}


def vertex_training_args(project: str, image: str, tpu: bool) -> dict:
  """The Vertex custom-job spec of the Trainer."""
  machine = (dict(VERTEX_TPU_MACHINE) if tpu else
             {"machine_type": VERTEX_MACHINE_TYPE})
  return {"project": project,
          "worker_pool_specs": [{"machine_spec": machine, "replica_count": 1,
                                 "container_spec": {"image_uri": image}}]}
