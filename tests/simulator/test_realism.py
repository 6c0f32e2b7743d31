"""The simulator against the real TPU protos (../shared/data/real_tpu).

The tile statistics that matter most to a user (how good the compiler's
default is, how far configs spread) must stay inside what the ten real
kernels show; `benchmarks/bench_realism` reports every statistic.
"""

import glob
import os

import numpy as np
import pytest

from featurize import tuning
from simulator import hardware
from simulator import programs
from simulator import realism
from simulator import synth
from simulator import tile_cost

REAL = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared",
                    "data", "real_tpu", "tile_tuning_data.pb")


@pytest.fixture(scope="module")
def real(tmp_path_factory):
  if not os.path.exists(REAL):
    pytest.skip(f"{REAL}: the real protos are not here")
  tmp = tmp_path_factory.mktemp("real")
  tuning.featurize(REAL, str(tmp))
  return realism.collect(sorted(glob.glob(str(tmp / "*.npz"))))


# Every chip variant must stay as realistic as the default.
@pytest.fixture(scope="module", params=list(hardware.CHIPS))
def stats(request, real, tmp_path_factory):
  tmp = tmp_path_factory.mktemp("realism")
  synth.synth_collection("tile:xla", str(tmp / "sim"), graphs=120, seed=5,
                         scale="small", progress=False, chip=request.param)
  sim = realism.collect(sorted(glob.glob(
      str(tmp / "sim" / "npz" / "tile" / "xla" / "*" / "*.npz"))))
  return {c.name: c for c in realism.compare(real, sim)}


@pytest.mark.parametrize("name", ["default_top1_error", "default_rank",
                                  "spread", "p90_over_best"])
def test_simulated_tile_inside_real_range(stats, name):
  assert stats[name].inside, (name, stats[name].real,
                              np.median(stats[name].sim),
                              stats[name].sim.mean())


def test_real_default_is_config_zero_and_near_best(stats):
  # The convention the guard relies on, read from the real files.
  real = stats["default_top1_error"].real
  assert len(real) == 10 and real.max() < 0.2 and np.mean(real == 0) >= 0.5


def test_compiler_default_is_best_by_its_own_estimate():
  rng = np.random.default_rng(0)
  kernel = programs.kernel(rng, 20)
  prof = tile_cost.profile(kernel.instructions)
  out, cin = tile_cost.sample_configs(prof, np.random.default_rng(1), 50)
  assert len(np.unique(np.concatenate([out, cin[:, None]], 1), axis=0)) == \
      len(out)
  rt = tile_cost.runtime_ns(prof, out, cin)
  # Within the estimate errors of both (each under 4 sigma) of the best.
  assert rt[0] <= rt.min() * np.exp(8 * tile_cost.COMPILER_ERROR)
  # And the measured set stays within the search factor (plus that error).
  assert rt.max() <= rt[0] * tile_cost.SEARCH_RANGE[1] * np.exp(
      8 * tile_cost.COMPILER_ERROR)
