"""Settings of the tpurank TFX pipeline, shared by every runner.

Values a user changes per run (data, collection, where things go) come in
through `tpurank pipeline ...` flags; the defaults live here.
"""

from typing import Optional

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
# TPUClusterResolver("local") and trains under TPUStrategy. So is a TPU pod
# slice (`--tpu-topology`, e.g. "2x2x1": TPU VMs of VERTEX_TPU_POD_ACCELERATOR
# in that topology, MachineSpec.tpu_topology), and a multi-worker CPU pool
# (`--workers N`): a chief pool of one replica and a worker pool of N-1, the
# same machine and image; Vertex sets TF_CONFIG on each replica and the
# trainer trains under MultiWorkerMirroredStrategy (`trainer/run_fn.py`).
VERTEX_MACHINE_TYPE = "n1-standard-8"
VERTEX_TPU_MACHINE = {"machine_type": "cloud-tpu",
                      "accelerator_type": "TPU_V3", "accelerator_count": 8}
VERTEX_TPU_POD_ACCELERATOR = "TPU_V4_POD"


def tpu_topology_chips(topology: str) -> int:
  """Chips of a TPU topology such as "2x2x1" (ValueError if malformed)."""
  dims = topology.lower().split("x")
  if len(dims) < 2 or not all(d.isdigit() and int(d) > 0 for d in dims):
    raise ValueError(f"TPU topology {topology!r}: expected sizes joined by "
                     "'x', e.g. 2x2x1")
  chips = 1
  for d in dims:
    chips *= int(d)
  return chips


def vertex_training_args(project: str, image: str, tpu: bool,
                         workers: int = 1,
                         tpu_topology: Optional[str] = None) -> dict:
  """The Vertex custom-job spec of the Trainer.

  Args:
    project: Google Cloud project.
    image: The trainer's container image.
    tpu: One Cloud TPU host (VERTEX_TPU_MACHINE).
    workers: Replicas training together (> 1: a chief pool and a worker
      pool, MultiWorkerMirroredStrategy); CPU machines only.
    tpu_topology: A TPU pod slice of this topology instead (e.g. "2x2x1").
  """
  if workers < 1 or (workers > 1 and (tpu or tpu_topology)):
    raise ValueError(f"workers={workers}: expected 1 with a TPU, else >= 1")
  if tpu_topology:
    machine = {"machine_type": "cloud-tpu",
               "accelerator_type": VERTEX_TPU_POD_ACCELERATOR,
               "accelerator_count": tpu_topology_chips(tpu_topology),
               "tpu_topology": tpu_topology}
  elif tpu:
    machine = dict(VERTEX_TPU_MACHINE)
  else:
    machine = {"machine_type": VERTEX_MACHINE_TYPE}

  def pool(replicas):
    return {"machine_spec": dict(machine), "replica_count": replicas,
            "container_spec": {"image_uri": image}}

  # Vertex: the first pool is the chief (exactly one replica), the second
  # the workers.
  pools = [pool(1)] + ([pool(workers - 1)] if workers > 1 else [])
  return {"project": project, "worker_pool_specs": pools}
