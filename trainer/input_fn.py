"""Reading GraphTensor TFRecords into model inputs and ranking labels.

Records are serialized `tf.Example`s of `schemas/*.pbtxt` (one graph with up
to K configs each), GZIP-compressed as TFX writes them or plain; each file's
compression is detected from its first bytes.
"""

import glob
import os
from typing import Optional, Sequence

import tensorflow as tf
import tensorflow_gnn as tfgnn

from schemas import graph_tensor
from schemas.errors import fail
from trainer import graph_ops
from trainer import hparams
from trainer import ranking

_GZIP_MAGIC = b"\x1f\x8b"


def list_record_files(paths: Sequence[str]) -> list[str]:
  """Expands files, directories (recursively) and glob patterns to files."""
  files = []
  for p in paths:
    if os.path.isdir(p):
      for root, _, names in os.walk(p):
        files += [os.path.join(root, n) for n in sorted(names)
                  if not n.startswith(".")]
    else:
      files += sorted(glob.glob(p)) or [p]
  return sorted(files)


def _is_gzip(path: str) -> bool:
  try:
    with tf.io.gfile.GFile(path, "rb") as f:
      return f.read(2) == _GZIP_MAGIC
  except (tf.errors.NotFoundError, OSError) as e:
    raise fail(path, "file", "a readable TFRecord file", str(e)) from e


def read_records(files: Sequence[str], shuffle_files: bool = False,
                 seed: Optional[int] = None,
                 shard: Optional[tuple[int, int]] = None) -> tf.data.Dataset:
  """Serialized examples of all files (each file's compression detected).

  Args:
    files: TFRecord files.
    shuffle_files: Read the files in a random order.
    seed: Its seed.
    shard: (count, index): only this input pipeline's share of the examples
      (one of `count` workers'), see `shard_policy`.
  """
  files = list(files)
  if not files:
    raise fail("<records>", "files", "at least one TFRecord file", "none")
  policy = shard_policy(len(files), shard[0]) if shard else None
  if policy == "files":
    files = files[shard[1]::shard[0]]
  elif policy == "data":
    # Every worker must see the same order before taking its share.
    shuffle_files = False
  gz = [f for f in files if _is_gzip(f)]
  plain = [f for f in files if f not in gz]
  parts = []
  for group, compression in ((gz, "GZIP"), (plain, "")):
    if group:
      ds = tf.data.Dataset.from_tensor_slices(group)
      if shuffle_files:
        ds = ds.shuffle(len(group), seed=seed)
      parts.append(ds.interleave(
          lambda f, c=compression: tf.data.TFRecordDataset(
              f, compression_type=c),
          cycle_length=4, num_parallel_calls=tf.data.AUTOTUNE,
          deterministic=not shuffle_files))
  ds = parts[0]
  for other in parts[1:]:
    ds = ds.concatenate(other)
  if policy == "data":
    ds = ds.shard(*shard)
  return ds


def shard_policy(num_files: int, num_shards: int) -> Optional[str]:
  """How `num_shards` input pipelines split `num_files` files.

  "files" (each reads its own files: no worker reads what it drops) when
  every shard gets a file; else "data" (each reads everything in the same
  order and keeps every `num_shards`-th example: `tpurank train` writes one
  record file per split). None for a single pipeline. Either way each
  example goes to exactly one worker, as tf.data's FILE/DATA auto-shard
  policies would; `train_dataset` shards itself because its batches are
  merged graphs, which the auto-sharding's rebatching cannot split.
  """
  if num_shards <= 1:
    return None
  return "files" if num_files >= num_shards else "data"


def plain_graph_fn(fn):
  """`fn`, traced into graphs without AutoGraph conversion.

  The data path and the model have no data-dependent Python control flow, so
  AutoGraph would only rewrite (slowly: ~8 s per training start, most of it
  in TF-GNN's own code) what traces the same without it.
  """
  return tf.autograph.experimental.do_not_convert(fn)


def parse_batch(kind: str, serialized: tf.Tensor) -> tfgnn.GraphTensor:
  """[batch] serialized examples -> one merged GraphTensor (a component each)."""
  return graph_tensor.parse(kind, serialized).merge_batch_to_components()


def model_input(kind: str, serialized: tf.Tensor,
                join: str = hparams.JOINS[0]) -> tfgnn.GraphTensor:
  """[batch] serialized examples -> the model's (unpadded) input graph (for
  a layout model of the given `join`)."""
  return graph_ops.expand(kind, parse_batch(kind, serialized), join)


def train_dataset(files: Sequence[str], kind: str, batch_size: int, k: int,
                  shuffle_buffer: int = 256, seed: Optional[int] = None,
                  repeat: bool = True,
                  size_constraints: Optional[tfgnn.SizeConstraints] = None,
                  join: str = hparams.JOINS[0],
                  shard: Optional[tuple[int, int]] = None) -> tf.data.Dataset:
  """(model input graph, labels [batch, k]) batches for training.

  Args:
    files: TFRecord files.
    kind: "tile" or "layout".
    batch_size: Examples (graphs with their K configs) per batch.
    k: Configs per example (examples with fewer are padded, labels -1).
    shuffle_buffer: Examples in the shuffle buffer.
    seed: Shuffle seed.
    repeat: Repeat forever (epochs are counted in steps).
    size_constraints: Pad every batch to these totals (static shapes for
      TPUs and XLA); None leaves batches unpadded.
    join: The layout model's join (`hparams.JOINS`).
    shard: (count, index): this worker's share of the examples (`batch_size`
      is then per worker), see `read_records`.
  """
  ds = read_records(files, shuffle_files=True, seed=seed, shard=shard)
  if repeat:
    ds = ds.repeat()
  ds = ds.shuffle(shuffle_buffer, seed=seed).batch(batch_size,
                                                   drop_remainder=True)

  def prepare(serialized):
    graph = parse_batch(kind, serialized)
    labels = ranking.labels(kind, graph, k)
    model_graph = graph_ops.expand(kind, graph, join)
    if size_constraints is not None:
      model_graph, _ = tfgnn.pad_to_total_sizes(model_graph, size_constraints)
    return model_graph, labels

  return ds.map(plain_graph_fn(prepare),
                num_parallel_calls=tf.data.AUTOTUNE).prefetch(2)


def scan_examples(files: Sequence[str], kind: str,
                  join: str = hparams.JOINS[0]) -> tuple[int, tuple]:
  """One pass over the records: the example count and the largest sizes.

  Returns:
    (examples, (components, {node set: nodes}, {edge set: edges})) where
    each size is the largest any single example has after expansion.
  """
  # Sizes are computed inside tf.data (parallel, no GraphTensor reaches
  # Python) and reduced in-graph: this pass runs before every training.
  # The set names come from the expanded graph's spec: nothing is parsed.
  spec = read_records(files).batch(1).map(plain_graph_fn(
      lambda s: model_input(kind, s, join))).element_spec
  node_sets = sorted(spec.node_sets_spec)
  edge_sets = sorted(spec.edge_sets_spec)

  def sizes(serialized):
    g = model_input(kind, serialized, join)
    return tf.stack([tf.cast(g.num_components, tf.int64)] +
                    [tf.cast(g.node_sets[n].total_size, tf.int64)
                     for n in node_sets] +
                    [tf.cast(g.edge_sets[e].total_size, tf.int64)
                     for e in edge_sets])

  ds = read_records(files).batch(1).map(
      plain_graph_fn(sizes), num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
  count, top = ds.reduce(
      (tf.constant(0, tf.int64), tf.zeros([1 + len(node_sets) + len(
          edge_sets)], tf.int64)),
      lambda acc, x: (acc[0] + 1, tf.maximum(acc[1], x)))
  if int(count) == 0:
    raise fail(files[0], "records", "at least one example", "none")
  top = [int(v) for v in top.numpy()]
  return int(count), (top[0], dict(zip(node_sets, top[1:1 + len(node_sets)])),
                      dict(zip(edge_sets, top[1 + len(node_sets):])))


def constraints_for(biggest: tuple, batch_size: int) -> tfgnn.SizeConstraints:
  """Totals that fit any batch of `batch_size` examples (see scan_examples).

  Room for batch_size of the largest examples plus one padding node/edge
  and one padding component, as TF-GNN's padding requires; so every batch
  fits and none is skipped.
  """
  components, nodes, edges = biggest
  return tfgnn.SizeConstraints(
      total_num_components=components * batch_size + 1,
      total_num_nodes={n: v * batch_size + 1 for n, v in nodes.items()},
      total_num_edges={n: v * batch_size + 1 for n, v in edges.items()})


def size_constraints_for(files: Sequence[str], kind: str, batch_size: int,
                         join: str = hparams.JOINS[0]
                         ) -> tfgnn.SizeConstraints:
  """Totals that fit any batch of `batch_size` examples of these files."""
  return constraints_for(scan_examples(files, kind, join)[1], batch_size)
