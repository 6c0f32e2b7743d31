"""Tests for turning one graph into examples of K configs."""

import numpy as np

from pipeline import examples
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
