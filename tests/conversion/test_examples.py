"""Tests for turning one graph into examples of K configs."""

import numpy as np

from conversion import examples
from schemas import graph_tensor
from schemas import npz_format


def test_eval_chunks_cover_every_config_in_order():
  chunks = examples.config_chunks(23, 5, "valid", "g")
  np.testing.assert_array_equal(np.concatenate(chunks), np.arange(23))
  assert [len(c) for c in chunks] == [5, 5, 5, 5, 3]


def test_train_chunks_are_deterministic_shuffled_and_bounded():
  a = examples.config_chunks(40, 8, "train", "g", seed=1)
  b = examples.config_chunks(40, 8, "train", "g", seed=1)
  c = examples.config_chunks(40, 8, "train", "h", seed=1)
  assert all(np.array_equal(x, y) for x, y in zip(a, b))
  assert not np.array_equal(np.concatenate(a), np.concatenate(c))
  assert sorted(np.concatenate(a)) == list(range(40))
  assert len(examples.config_chunks(40, 8, "train", "g", max_examples=2)) == 2


def test_examples_carry_the_right_configs(layout_npz):
  g = npz_format.load_graph(layout_npz)
  gid = "layout:xla:random:x"
  seen = []
  for split in ("valid", "train"):
    for ex in examples.graph_examples(g, gid, 7, split, hops=1):
      parsed = graph_tensor.parse("layout", ex)
      idx = parsed.node_sets["config"]["index"].numpy()
      feat = parsed.node_sets["node_config"]["feat"].numpy()
      np.testing.assert_array_equal(
          feat.reshape(len(idx), -1, 18), g.take_config_feat(idx))
      np.testing.assert_array_equal(
          parsed.node_sets["config"]["runtime"], g.config_runtime[idx])
      seen.append((split, idx))
  valid = np.concatenate([i for s, i in seen if s == "valid"])
  np.testing.assert_array_equal(valid, np.arange(g.num_configs))


def test_identical_train_configs_are_merged_with_mean_runtime(layout_npz,
                                                               make_npz):
  from tests.conftest import load_dict  # pylint: disable=g-import-not-at-top
  d = load_dict(layout_npz)
  # Config 1 becomes a copy of config 0, with a different runtime.
  d["node_config_feat"][1] = d["node_config_feat"][0]
  d["config_runtime"][:2] = [100, 300]
  g = npz_format.load_graph(make_npz(d), "layout")
  merged = examples.merge_duplicates(g)
  assert merged.merged == 1
  assert 1 not in merged.representatives and 0 in merged.representatives
  assert merged.graph.config_runtime[0] == 200
  train = [graph_tensor.parse("layout", ex) for ex in examples.graph_examples(
      g, "layout:xla:random:x", 4, "train", hops=1)]
  idx = np.concatenate([t.node_sets["config"]["index"].numpy()
                        for t in train])
  runtime = np.concatenate([t.node_sets["config"]["runtime"].numpy()
                            for t in train])
  assert sorted(idx) == sorted(merged.representatives)
  assert runtime[list(idx).index(0)] == 200
  # Evaluation keeps every config, with its own runtime.
  valid = [graph_tensor.parse("layout", ex) for ex in examples.graph_examples(
      g, "layout:xla:random:x", 4, "valid", hops=1)]
  assert sum(int(v.node_sets["config"].sizes[0]) for v in valid) == (
      g.num_configs)
