"""A small exported layout model in a TF Serving model repository."""

import os
import shutil

import numpy as np
import pytest

from conversion import examples
from schemas import npz_format
from tests.conftest import LAYOUT_SEED
from tests.conftest import _write
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


@pytest.fixture(scope="session")
def exported_layout_model(tmp_path_factory):
  """The model `repository` holds, exported once per session (~15 s): that
  of `build_model` on the `layout_npz` graph (the same in every test)."""
  tmp = tmp_path_factory.mktemp("exported")
  npz = _write("layout", tmp / "layout.npz", seed=LAYOUT_SEED)
  return export.save(build_model(npz), "layout",
                     str(tmp / "tpurank" / "1"), {})


@pytest.fixture
def repository(tmp_path, exported_layout_model):
  """(base, model version dir) with one version of model "tpurank": a copy
  of one export, which a test may change."""
  base = str(tmp_path / "models")
  path = os.path.join(base, "tpurank", "1")
  shutil.copytree(exported_layout_model, path)
  return base, path
