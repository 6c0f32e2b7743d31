"""Tests for grouping model calls within an op-copy budget."""

import numpy as np
import pytest

from conversion import examples
from conversion import prune
from schemas import npz_format
from serving import call_budget
from serving import saved_model_scorer
from trainer import call_cost


def _split(costs, budget):
  return [list(costs[g]) for g in call_budget.groups(costs, budget)]


def test_groups_stay_within_the_budget():
  assert _split([3, 3, 3, 5], 6) == [[3, 3], [3], [5]]
  assert _split([9, 1, 1], 4) == [[9], [1, 1]]  # Over budget: alone.
  assert _split([], 4) == []


def test_op_copies_count_the_pruned_graph_once_per_config(layout_npz):
  g = npz_format.load_graph(layout_npz)
  exs = list(examples.graph_examples(g, "layout:x:g", 3, "test", hops=2))
  sub = prune.prune(g, 2)
  pruned, nc = sub.num_nodes, len(sub.node_config_ids)
  sizes = [min(3, g.num_configs - 3 * i) for i in range(len(exs))]
  # Early join: the pruned graph once per config.
  assert [call_budget.op_copies(e, "early") for e in exs] == [
      pruned * k for k in sizes]
  # Late join: the graph once, and rows per config.
  assert [call_budget.op_copies(e, "late") for e in exs] == [
      call_cost.example_cost(pruned, k, nc, "late") for k in sizes]
  with pytest.raises(call_budget.NotAnExample):
    call_budget.op_copies(b"\xff\xff not a proto")


def test_grouped_calls_score_exactly_like_one_call(repository, layout_npz):
  _, path = repository
  g = npz_format.load_graph(layout_npz)
  exs = list(examples.graph_examples(g, "layout:x:g", 4, "test", hops=2))
  assert len(exs) >= 3
  one = saved_model_scorer.SavedModelScorer(path, max_op_copies=10**9)
  calls = []

  def counted(group):
    calls.append(len(group))
    return one._call(group)  # pylint: disable=protected-access

  want = one.score_examples(exs)
  budget = max(call_budget.op_copies(e) for e in exs)
  got = call_budget.score_in_groups(counted, exs, budget=budget)
  assert calls == [1] * len(exs)  # One example per call fits the budget.
  with pytest.raises(call_budget.OverBudget):  # One alone is too many.
    call_budget.score_in_groups(counted, exs, budget=budget - 1)
  np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(got[1], want[1])
