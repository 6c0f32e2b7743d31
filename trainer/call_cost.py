"""What one model call costs in memory, counted in op copies.

An early-join layout model copies the (pruned) graph once per config and
holds ~5 KB of activations per op copy. A late-join model holds the graph
once and, per config, rows for the ops the config can change
(`config_rows`); configs that agree share rows, but the budget counts
none shared (a call of all-distinct configs must fit too). Scoring paths group examples within a budget of op copies
(`serving.call_budget`) and the served "rank" signature splits a graph's
configs into chunks within it (`export`). TF-free: the CLI shows the budget.
"""

# Op copies per model call: ~2 GB of activations.
OP_COPY_BUDGET = 400_000
# Rows per configurable op of a late-join example (the ops whose layout or
# reads a config can change, and the operands they read; ~3 on simulated
# and real graphs) and the memory of a row in op copies (its features and
# the expansion's temporaries, ~1 KB).
ROWS_PER_CONFIGURABLE = 3
ROW_COST = 0.25


def example_cost(ops: int, configs: int, configurable: int,
                 join: str) -> float:
  """Op copies one example costs in a model call.

  Args:
    ops: Ops of its (pruned) graph.
    configs: Its configs.
    configurable: Configurable ops of the graph (0 for tile).
    join: "late" or "early" (`trainer.hparams.JOINS`); tile examples cost
      their ops whatever the join.
  """
  if not configurable:
    return float(ops)
  if join == "early":
    return float(ops * configs)
  rows = min(ops, ROWS_PER_CONFIGURABLE * configurable)
  return ops + configs * rows * ROW_COST


def configs_per_example(ops, configurable, join: str,
                        budget: float = OP_COPY_BUDGET, most=1 << 30,
                        minimum=min, maximum=max):
  """The most configs (at least 1, at most `most`) a layout example of this
  graph can carry within `budget`.

  Plain arithmetic: `ops` and `configurable` may be Python numbers or
  tensors (then pass `tf.minimum`, `tf.maximum`; the result is a float
  tensor), so the scorers and the served signature count alike.
  """
  if join == "early":
    per_config, fixed = ops, 0
  else:
    per_config = maximum(
        minimum(ops, ROWS_PER_CONFIGURABLE * configurable), 1) * ROW_COST
    fixed = ops
  room = (budget - fixed) // per_config
  return maximum(1.0, minimum(most, room))
