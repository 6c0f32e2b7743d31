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
  # Reference: expand every example on its own, eagerly.
  expected_count, comps, nodes, edges = 0, 0, {}, {}
  for serialized in input_fn.read_records([path]).batch(1):
    g = input_fn.model_input(kind, serialized)
    expected_count += 1
    comps = max(comps, int(g.num_components))
    for name, ns in g.node_sets.items():
      nodes[name] = max(nodes.get(name, 0), int(ns.total_size))
    for name, es in g.edge_sets.items():
      edges[name] = max(edges.get(name, 0), int(es.total_size))

  count, biggest = input_fn.scan_examples([path], kind)

  assert count == expected_count > 3  # Several examples per graph.
  assert biggest == (comps, nodes, edges)


def test_scan_examples_of_an_empty_file_names_it(tmp_path):
  path = str(tmp_path / "empty.tfrecord")
  with tf.io.TFRecordWriter(path):
    pass
  with pytest.raises(errors.InputError, match="empty.tfrecord"):
    input_fn.scan_examples([path], "layout")
