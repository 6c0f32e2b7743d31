"""Settings of the tpurank TFX pipeline, shared by every runner.

Values a user changes per run (data, collection, where things go) come in
through `tpurank pipeline ...` flags; the defaults live here.
"""

from conversion import prune

PIPELINE_NAME = "tpurank"
MODEL_NAME = "tpurank"  # Serving directory: <serving base>/<MODEL_NAME>/<v>/.

# Conversion (pipeline/convert.ConvertOptions): configs per train example,
# per valid/test example, k-hop pruning of layout graphs, train examples per
# graph (bounds the output size of graphs with many configs). A train
# example's K configs are fixed at conversion, so a config is only ever
# ranked against the others of its chunk: layout graphs keep up to 64 chunks
# (1024 configs), which gives the ranking loss many more distinct pairs than
# 24 did (see benchmarks/results/quality.md).
CONVERT = {"k": 16, "eval_k": 128, "hops": prune.DEFAULT_HOPS, "seed": 0,
           "max_examples": {"tile": 8, "layout": 64}}

# Trainer hyperparameters (trainer.train.TrainConfig fields).
TRAIN_HPARAMS = {"max_minutes": 10.0, "patience": 6}

# Blessing: the primary metric must clear this (layout: Kendall tau at least,
# tile: top-5 error at most) and be no worse than the last blessed model's.
THRESHOLDS = {"layout": 0.2, "tile": 0.5}

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
