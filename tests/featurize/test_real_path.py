"""Raw TPU protos through conversion and batch scoring, as they are."""

import csv
import os

import pytest

from conversion import convert_job
from conversion.options import ConvertOptions
from schemas import npz_format
from serving import score_job
from tests.featurize.test_tuning import LAYOUT_PB
from tests.featurize.test_tuning import TILE_PB
from tests.serving.conftest import build_model
from trainer import export

IN_MEMORY = ["--runner=DirectRunner", "--direct_running_mode=in_memory"]

pytestmark = pytest.mark.skipif(not os.path.exists(LAYOUT_PB),
                                reason="real TPU data not present")


@pytest.fixture(scope="module")
def raw_data(tmp_path_factory):
  """A data dir whose splits hold the raw .pb files themselves."""
  root = str(tmp_path_factory.mktemp("raw"))
  for split in ("train", "valid", "test"):
    folder = npz_format.collection_dir(root, "layout:xla:random", split)
    os.makedirs(folder)
    os.symlink(os.path.abspath(LAYOUT_PB), os.path.join(folder, "real.pb"))
  folder = npz_format.collection_dir(root, "tile:xla", "test")
  os.makedirs(folder)
  os.symlink(os.path.abspath(TILE_PB), os.path.join(folder, "kernels.pb"))
  return root


def test_convert_reads_raw_protos(raw_data, tmp_path):
  summary = convert_job.run(raw_data, "layout:xla:random", str(tmp_path),
                            ConvertOptions(k=16, eval_k=64),
                            IN_MEMORY, splits=["train", "valid"])
  assert summary["mismatches"] == []
  train, valid = summary["splits"]["train"], summary["splits"]["valid"]
  assert train["graphs_converted"] == valid["graphs_converted"] == 1
  assert train["configs"] == valid["configs"] == 112
  assert train["configs_merged"] == 21  # 112 runs, 91 distinct configs.
  assert valid["examples"] == 2  # 112 configs in chunks of 64.


def test_score_ranks_real_graphs(raw_data, tmp_path, layout_npz, tile_npz):
  models = [export.save(build_model(layout_npz), "layout",
                        str(tmp_path / "layout_model" / "1"), {}),
            export.save(build_model(tile_npz, kind="tile"), "tile",
                        str(tmp_path / "tile_model" / "1"), {})]
  out = str(tmp_path / "submission.csv")
  summary = score_job.run(models, raw_data, out, beam_args=IN_MEMORY)
  assert summary["reconciled"] and summary["dead_letters"] == 0
  with open(out) as f:
    rows = {r["ID"]: r["TopConfigs"].split(";") for r in csv.DictReader(f)}
  assert len(rows) == 1 + 10  # The program and the 10 kernels.
  assert sorted(map(int, rows["layout:xla:random:real"])) == list(range(112))
  tile = [v for k, v in rows.items() if k.startswith("tile:xla:kernels__")]
  # The 5 best; kernels with fewer successful runs list them all.
  assert sorted(len(v) for v in tile) == [2, 3, 3, 3, 5, 5, 5, 5, 5, 5]
