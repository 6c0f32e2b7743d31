"""A small exported layout model in a TF Serving model repository."""

import os

import numpy as np
import pytest

from conversion import examples
from schemas import npz_format
from tests.trainer.helpers import unit_stats
from trainer import export
from trainer import hparams
from trainer import input_fn
from trainer import model as model_lib


def build_model(npz, seed=0, kind="layout"):
  """A small untrained score model (weights from `seed`)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.keras.utils.set_random_seed(seed)
  g = npz_format.load_graph(npz)
  ex = list(examples.graph_examples(g, f"{kind}:x:g", 4, "valid", hops=2))
  graph = input_fn.model_input(kind, np.array(ex[:2], dtype=object))
  return model_lib.build_score_model(
      hparams.ModelConfig(kind=kind, hidden=16, layers=1),
      graph.spec.relax(num_components=True, num_nodes=True, num_edges=True),
      unit_stats())


@pytest.fixture
def repository(tmp_path, layout_npz):
  """(base, model version dir) with one version of model "tpurank"."""
  base = str(tmp_path / "models")
  path = export.save(build_model(layout_npz), "layout",
                     os.path.join(base, "tpurank", "1"), {})
  return base, path
