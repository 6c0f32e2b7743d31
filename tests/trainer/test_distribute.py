"""MirroredStrategy over 2 logical CPUs matches one device on the same batch."""

import os
import subprocess
import sys
import textwrap

from tests.trainer.helpers import make_records

_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import tensorflow_gnn as tfgnn
    import tensorflow_ranking as tfr
    from trainer import hparams, input_fn, model as model_lib, ranking
    from tests.trainer.helpers import unit_stats

    path, kind, k = sys.argv[1], sys.argv[2], 5
    serialized = next(iter(input_fn.read_records([path]).batch(4)))
    halves = [serialized[:2], serialized[2:]]
    constraints = input_fn.size_constraints_for([path], kind, 2, k)

    def batch(s):
      graph = input_fn.parse_batch(kind, s)
      labels = ranking.labels(kind, graph, k)
      padded, _ = tfgnn.pad_to_total_sizes(input_fn.graph_ops.expand(
          kind, graph), constraints)
      return padded, labels

    loss_fn = tfr.keras.losses.ListMLELoss(
        reduction=tf.keras.losses.Reduction.NONE)

    def loss_and_grads(ranker, graph, labels):
      with tf.GradientTape() as tape:
        loss = tf.reduce_sum(loss_fn(labels, ranker(graph, training=True)))
      grads = tape.gradient(loss, ranker.trainable_variables)
      return loss, [tf.convert_to_tensor(g) for g in grads]

    g0, _ = batch(halves[0])
    cfg = hparams.ModelConfig(kind=kind, hidden=16, layers=2)
    tf.keras.utils.set_random_seed(0)
    single_sm = model_lib.build_score_model(cfg, g0.spec, unit_stats())
    single = model_lib.RankingModel(single_sm, 2, k)
    # One device: both halves, summed.
    parts = [loss_and_grads(single, *batch(h)) for h in halves]
    loss_1 = sum(p[0] for p in parts)
    grads_1 = [a + b for a, b in zip(parts[0][1], parts[1][1])]

    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    assert strategy.num_replicas_in_sync == 2
    with strategy.scope():
      sm = model_lib.build_score_model(cfg, g0.spec, unit_stats())
      ranker = model_lib.RankingModel(sm, 2, k)
    ranker(g0)
    single(g0)
    ranker.set_weights(single.get_weights())
    inputs = strategy.experimental_distribute_values_from_function(
        lambda ctx: batch(halves[ctx.replica_id_in_sync_group]))

    @tf.function
    def step(inp):
      return strategy.run(lambda g, y: loss_and_grads(ranker, g, y),
                          args=inp)

    loss_r, grads_r = step(inputs)
    loss_2 = strategy.reduce("SUM", loss_r, axis=None)
    grads_2 = [strategy.reduce("SUM", g, axis=None) for g in grads_r]
    np.testing.assert_allclose(loss_2, loss_1, rtol=1e-4)
    for a, b in zip(grads_2, grads_1):
      np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)
    print("OK", float(loss_1), float(loss_2), len(grads_1))
""")


def _run(tmp_path, kind):
  path, _ = make_records(tmp_path, kind, graphs=2, k=5, split="valid")
  root = os.path.dirname(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__))))
  r = subprocess.run([sys.executable, "-c", _SCRIPT, path, kind],
                     capture_output=True, text=True, cwd=root, check=False,
                     env=dict(os.environ, PYTHONPATH=root))
  assert r.returncode == 0, r.stderr[-3000:]
  assert "OK" in r.stdout


def test_mirrored_matches_single_device_layout(tmp_path):
  _run(tmp_path, "layout")


def test_mirrored_matches_single_device_tile(tmp_path):
  _run(tmp_path, "tile")
