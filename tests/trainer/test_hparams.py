"""Hyper-parameter defaults that depend on the model."""

import pytest

from trainer import hparams


@pytest.mark.parametrize("collection,join,xla", [
    ("tile:xla", "late", True), ("layout:xla:random", "early", True),
    ("layout:xla:random", "late", False)])
def test_xla_by_default_only_where_it_speeds_up_cpu_training(collection,
                                                             join, xla):
  kind = "tile" if collection.startswith("tile") else "layout"
  cfg = hparams.TrainConfig(
      collection=collection, train_files=[], valid_files=[], out_dir="o",
      export=False, model=hparams.ModelConfig(kind=kind, join=join))
  assert cfg.xla is xla
  forced = hparams.TrainConfig(
      collection=collection, train_files=[], valid_files=[], out_dir="o",
      export=False, xla=not xla, model=hparams.ModelConfig(kind=kind,
                                                           join=join))
  assert forced.xla is (not xla)


def test_unknown_join_is_refused():
  with pytest.raises(ValueError, match="join"):
    hparams.ModelConfig(kind="layout", join="middle")


def test_rank_defaults_exist_for_every_join():
  from conversion import options  # pylint: disable=g-import-not-at-top
  assert set(options.RANK_K) == set(options.RANK_BATCH) == set(hparams.JOINS)
