"""Tests of the record scan that sizes the static (TPU/XLA) padding."""

import pytest
import tensorflow as tf

from schemas import errors
from tests.trainer import helpers
from trainer import input_fn


@pytest.mark.parametrize("kind", ["tile", "layout"])
def test_scan_examples_counts_and_takes_the_largest_expanded_sizes(
    tmp_path, kind):
  path, _ = helpers.make_records(tmp_path, kind, graphs=3, k=5)
  # Reference: expand every train example (a chunk of 5 configs) alone.
  expected_count, comps, nodes, edges = 0, 0, {}, {}
  for chunk in input_fn.train_examples([path], kind, 5).batch(1):
    g = input_fn.graph_ops.expand(kind, chunk.merge_batch_to_components())
    expected_count += 1
    comps = max(comps, int(g.num_components))
    for name, ns in g.node_sets.items():
      nodes[name] = max(nodes.get(name, 0), int(ns.total_size))
    for name, es in g.edge_sets.items():
      edges[name] = max(edges.get(name, 0), int(es.total_size))

  count, biggest = input_fn.scan_examples([path], kind, 5)

  assert count == expected_count > 3  # Several examples per graph.
  assert biggest == (comps, nodes, edges)


def test_scan_examples_of_an_empty_file_names_it(tmp_path):
  path = str(tmp_path / "empty.tfrecord")
  with tf.io.TFRecordWriter(path):
    pass
  with pytest.raises(errors.InputError, match="empty.tfrecord"):
    input_fn.scan_examples([path], "layout", 5)


@pytest.mark.parametrize("kind", ["tile", "layout"])
def test_train_records_hold_each_graph_once_and_cut_into_the_chunks(
    tmp_path, kind):
  # pylint: disable=g-import-not-at-top
  import numpy as np
  from conversion import examples
  from conversion import prune
  from schemas import graph_tensor
  from schemas import npz_format
  path, graphs = helpers.make_records(tmp_path, kind, graphs=2, k=5)
  assert sum(1 for _ in input_fn.read_records([path])) == 2  # One a graph.
  # What conversion wrote before: one example per chunk, the graph copied.
  coll = "tile:xla" if kind == "tile" else "layout:xla:random"
  expected = []
  for g in graphs:
    gid = npz_format.graph_id(coll, g.path)
    merged = examples.merge_duplicates(g)
    sub = prune.prune(merged.graph, 1)
    for c in examples.config_chunks(len(merged.representatives), 5, "train",
                                    gid, 0, 3):
      idx = merged.representatives[c]
      expected.append(graph_tensor.build(sub, gid, idx,
                                         merged.graph.take_config_feat(idx)))
  got = list(input_fn.train_examples([path], kind, 5))
  assert len(got) == len(expected) > 2
  got.sort(key=lambda g: (g.context["graph_id"].numpy()[0],
                          g.node_sets["config"]["index"].numpy()[0]))
  expected.sort(key=lambda g: (g.context["graph_id"].numpy()[0],
                               g.node_sets["config"]["index"].numpy()[0]))
  for a, b in zip(got, expected):
    for name, ns in b.node_sets.items():
      np.testing.assert_array_equal(a.node_sets[name].sizes, ns.sizes)
      for f, value in ns.features.items():
        np.testing.assert_array_equal(a.node_sets[name][f], value)
    for name, es in b.edge_sets.items():
      np.testing.assert_array_equal(a.edge_sets[name].adjacency.source,
                                    es.adjacency.source)
      np.testing.assert_array_equal(a.edge_sets[name].adjacency.target,
                                    es.adjacency.target)
    np.testing.assert_array_equal(a.context["num_configs"],
                                  b.context["num_configs"])
