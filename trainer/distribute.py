"""Picks the tf.distribute strategy at run time; keeps several workers in step.

Multi-worker training (`MultiWorkerMirroredStrategy`) reads the cluster from
the standard `TF_CONFIG` environment variable, as Vertex AI sets it for a
custom job with several worker pools. Every worker runs the same program;
wherever a worker could decide on its own (the time budget, early stopping,
where files go) it must decide as the others do, or the others wait in a
collective for ever: `ChiefValues` hands every worker the chief's numbers,
`write_dir` keeps the files of non-chief workers apart.
"""

import json
import os
import socket
from typing import Mapping, Optional, Sequence

import tensorflow as tf

from schemas.errors import fail

TF_CONFIG_ENV = "TF_CONFIG"
# The cluster's tasks that train. Vertex AI's TF_CONFIG names its first worker
# pool "chief" and its second "worker" (its CLUSTER_SPEC calls them
# workerpool0/1); "ps" and "evaluator" tasks take no part in the all-reduce.
TRAINING_TASKS = ("chief", "master", "worker")
_EXAMPLE = ('{"cluster": {"worker": ["host0:2222", "host1:2222"]}, '
            '"task": {"type": "worker", "index": 0}}')


def read_tf_config(environ: Optional[Mapping[str, str]] = None) -> dict:
  """The TF_CONFIG cluster description, checked.

  Raises:
    InputError: TF_CONFIG is unset, not JSON, or a field is wrong (the
      message names the field).
  """
  text = (os.environ if environ is None else environ).get(TF_CONFIG_ENV)
  if not text:
    raise fail(TF_CONFIG_ENV, "(environment variable)",
               f"the cluster as JSON, e.g. {_EXAMPLE}", "it unset or empty")
  try:
    config = json.loads(text)
  except ValueError as e:
    raise fail(TF_CONFIG_ENV, "(value)", "JSON", f"{text[:60]!r} ({e})"
               ) from e
  if not isinstance(config, dict):
    raise fail(TF_CONFIG_ENV, "(value)", "a JSON object", repr(config)[:60])
  cluster = config.get("cluster")
  if not isinstance(cluster, dict) or not any(
      cluster.get(t) for t in TRAINING_TASKS):
    raise fail(TF_CONFIG_ENV, "cluster", "an object with a non-empty "
               f"{' or '.join(map(repr, TRAINING_TASKS))} address list",
               repr(cluster)[:80])
  for name, addresses in cluster.items():
    if not (isinstance(addresses, list) and all(
        isinstance(a, str) and ":" in a for a in addresses)):
      raise fail(TF_CONFIG_ENV, f"cluster.{name}",
                 "a list of host:port addresses", repr(addresses)[:80])
  task = config.get("task")
  if not isinstance(task, dict) or task.get("type") not in cluster:
    raise fail(TF_CONFIG_ENV, "task.type",
               f"one of the cluster's tasks ({', '.join(sorted(cluster))})",
               repr(task.get("type") if isinstance(task, dict) else task))
  index, size = task.get("index"), len(cluster[task["type"]])
  if isinstance(index, bool) or not isinstance(index, int) or not (
      0 <= index < size):
    raise fail(TF_CONFIG_ENV, "task.index", f"an integer in 0..{size - 1}",
               repr(index))
  return config


def training_workers(environ: Optional[Mapping[str, str]] = None) -> int:
  """How many training workers TF_CONFIG names (0 if it is unset).

  Raises:
    InputError: TF_CONFIG is set but malformed.
  """
  env = os.environ if environ is None else environ
  if not env.get(TF_CONFIG_ENV):
    return 0
  cluster = read_tf_config(env)["cluster"]
  return sum(len(cluster.get(t) or ()) for t in TRAINING_TASKS)


def pick_strategy(tpu: Optional[str] = None, mirrored: bool = False,
                  multi_worker: bool = False) -> tf.distribute.Strategy:
  """TPUStrategy if `tpu` resolves, MultiWorkerMirroredStrategy or
  MirroredStrategy if asked, else the default strategy.

  A multi-worker strategy must be made before TensorFlow runs any op (it
  configures the runtime's collectives), so callers make it first.

  Args:
    tpu: A TPU name or address for TPUClusterResolver ("local" for a TPU VM),
      or None.
    mirrored: Use MirroredStrategy over all local devices.
    multi_worker: Use MultiWorkerMirroredStrategy over the workers TF_CONFIG
      names (each with its local devices).

  Raises:
    ValueError: If a TPU was asked for but none resolves, or several
      strategies were asked for.
    InputError: multi_worker with TF_CONFIG unset or malformed.
  """
  if sum(map(bool, (tpu, mirrored, multi_worker))) > 1:
    raise ValueError("--tpu, --mirrored and --multi-worker exclude each "
                     "other")
  if tpu:
    try:
      resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
      tf.config.experimental_connect_to_cluster(resolver)
      tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, tf.errors.OpError) as e:
      raise ValueError(f"--tpu {tpu}: no TPU could be resolved ({e}); drop "
                       "--tpu to train on this machine's devices") from e
    return tf.distribute.TPUStrategy(resolver)
  if multi_worker:
    read_tf_config()  # A clear error before TensorFlow's own.
    return tf.distribute.MultiWorkerMirroredStrategy()
  if mirrored:
    return tf.distribute.MirroredStrategy()
  return tf.distribute.get_strategy()


def worker_count(strategy: tf.distribute.Strategy) -> int:
  """Workers (processes) training together: 1 unless multi-worker."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or (
      resolver is None):
    return 1
  spec = resolver.cluster_spec().as_dict()
  return max(1, sum(len(spec.get(t) or ()) for t in TRAINING_TASKS))


def is_chief(strategy: tf.distribute.Strategy) -> bool:
  """Whether this worker writes the run's files (always, on one worker)."""
  return strategy.extended.should_checkpoint


def write_dir(path: str, strategy: tf.distribute.Strategy) -> str:
  """Where this worker writes what would go to `path`: `path` itself on the
  chief, a `workertemp_<task>` directory under it on other workers (Keras's
  convention), which `remove_write_dir` deletes when the run ends."""
  if is_chief(strategy):
    return path
  resolver = strategy.cluster_resolver
  return os.path.join(path, f"workertemp_{resolver.task_type}_"
                      f"{resolver.task_id}")


def remove_write_dir(path: str, strategy: tf.distribute.Strategy):
  """Deletes a non-chief worker's `write_dir(path)` (no-op on the chief)."""
  if not is_chief(strategy):
    tmp = write_dir(path, strategy)
    if tf.io.gfile.exists(tmp):
      tf.io.gfile.rmtree(tmp)


class ChiefValues:
  """Every worker gets the chief's values: one all-reduce in which only the
  chief contributes (a barrier, too: no worker passes it alone).

  Workers that decided apart (a time budget read from each one's clock,
  early stopping on each one's float rounding) would stop at different
  steps, and a worker still training would wait for the others for ever.
  On one worker the values come back as they are, with no collective.

  Init args:
    strategy: The training strategy.
  """

  def __init__(self, strategy: tf.distribute.Strategy):
    self._multi = worker_count(strategy) > 1
    if not self._multi:
      return
    # A multi-worker SUM adds every local replica: the chief's share is
    # split among its own replicas, the others add nothing.
    share = (1.0 / len(strategy.extended.worker_devices)
             if is_chief(strategy) else 0.0)

    @tf.function(autograph=False)
    def broadcast(values):
      return strategy.reduce(
          tf.distribute.ReduceOp.SUM,
          strategy.run(lambda: values * share), axis=None)

    self._broadcast = broadcast

  def __call__(self, values: Sequence[float]) -> list[float]:
    """The chief's `values` (the same length on every worker)."""
    if not self._multi:
      return [float(v) for v in values]
    out = self._broadcast(tf.constant(list(values), tf.float64))
    return [float(v) for v in out.numpy()]

  def barrier(self):
    """Returns once every worker has reached it."""
    self([0.0])


def localhost_tf_configs(n: int, vertex: bool = False) -> list[str]:
  """TF_CONFIG of each of `n` workers on free localhost ports (tests and
  benchmarks start them as processes): plain ("worker" tasks), or as Vertex
  AI sets it (a "chief" pool of 1, a "worker" pool of n-1)."""
  socks = [socket.socket() for _ in range(n)]
  for s in socks:
    s.bind(("localhost", 0))
  hosts = [f"localhost:{s.getsockname()[1]}" for s in socks]
  for s in socks:
    s.close()
  if not vertex:
    cluster = {"worker": hosts}
    tasks = [{"type": "worker", "index": i} for i in range(n)]
  else:
    cluster = {"chief": hosts[:1], "worker": hosts[1:]}
    tasks = [{"type": "chief", "index": 0}] + [
        {"type": "worker", "index": i} for i in range(n - 1)]
  return [json.dumps({"cluster": cluster, "task": t, "environment": "cloud"})
          for t in tasks]
