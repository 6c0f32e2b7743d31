"""Reading GraphTensor TFRecords into model inputs and ranking labels.

Records are serialized `tf.Example`s of `schemas/*.pbtxt` (one graph with
some of its configs each: train records all of a graph's sampled configs,
cut here into examples of K), GZIP-compressed as TFX writes them or plain;
each file's compression is detected from its first bytes.
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


def _configs_slice(kind: str, graph: tfgnn.GraphTensor, start,
                   end) -> tfgnn.GraphTensor:
  """Configs [start, end) of a parsed one-graph example, as an example.

  Layout rows are config-major (`graph_tensor.build`): a config's node
  config rows and their `configures` / `part_of` edges are consecutive.
  """
  config = graph.node_sets["config"]
  take = lambda x, a, b: x[a:b]
  node_sets = {"op": graph.node_sets["op"]}
  edge_sets = {"feed": graph.edge_sets["feed"]}
  node_sets["config"] = tfgnn.NodeSet.from_fields(
      sizes=tf.reshape(end - start, [1]),
      features={name: take(value, start, end)
                for name, value in config.features.items()})
  if kind == "layout":
    rows = graph.node_sets["node_config"]
    nc = rows.total_size // tf.maximum(config.total_size, 1)
    a, b = start * nc, end * nc
    node_sets["node_config"] = tfgnn.NodeSet.from_fields(
        sizes=tf.reshape(b - a, [1]),
        features={"feat": take(rows["feat"], a, b)})
    for name, target_shift in (("configures", 0), ("part_of", start)):
      adj = graph.edge_sets[name].adjacency
      edge_sets[name] = tfgnn.EdgeSet.from_fields(
          sizes=tf.reshape(b - a, [1]),
          adjacency=tfgnn.Adjacency.from_indices(
              source=("node_config", take(adj.source, a, b) - a),
              target=(adj.target_name,
                      take(adj.target, a, b) - target_shift)))
  return tfgnn.GraphTensor.from_pieces(context=graph.context,
                                       node_sets=node_sets,
                                       edge_sets=edge_sets)


def config_chunks(kind: str, graph: tfgnn.GraphTensor,
                  k: int) -> tf.data.Dataset:
  """A parsed one-graph example cut into examples of its next k configs.

  Train records hold each graph once with all its sampled configs
  (`conversion.examples`); cut here, each chunk is the example conversion
  used to write with the graph copied into it. A record of at most k
  configs is one chunk, itself.
  """
  configs = graph.node_sets["config"].total_size
  return tf.data.Dataset.range(
      (tf.cast(configs, tf.int64) + k - 1) // k).map(
          lambda i: _configs_slice(
              kind, graph, tf.cast(i, configs.dtype) * k,
              tf.minimum(tf.cast(i + 1, configs.dtype) * k, configs)))


def train_examples(files: Sequence[str], kind: str, k: int,
                   shuffle_files: bool = False, seed: Optional[int] = None,
                   shard: Optional[tuple[int, int]] = None
                   ) -> tf.data.Dataset:
  """Parsed train examples of at most k configs each (scalar GraphTensors).

  Args:
    files: TFRecord files.
    kind: "tile" or "layout".
    k: Configs per example (`config_chunks`).
    shuffle_files: Read the files in a random order.
    seed: Its seed.
    shard: This input pipeline's share of the records (`read_records`).
  """
  ds = read_records(files, shuffle_files=shuffle_files, seed=seed,
                    shard=shard)
  spec = graph_tensor.graph_spec(kind)
  ds = ds.map(plain_graph_fn(
      lambda s: tfgnn.parse_single_example(spec, s)),
              num_parallel_calls=tf.data.AUTOTUNE)
  # Chunks of a few graphs at a time, alternating: batches mix graphs.
  return ds.interleave(
      plain_graph_fn(lambda g: config_chunks(kind, g, k)),
      cycle_length=4, block_length=1)


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
    batch_size: Examples (graphs with K of their configs) per batch.
    k: Configs per example: records are cut into chunks of k
      (`config_chunks`); chunks with fewer are padded, labels -1.
    shuffle_buffer: Examples in the shuffle buffer.
    seed: Shuffle seed.
    repeat: Repeat forever (epochs are counted in steps).
    size_constraints: Pad every batch to these totals (static shapes for
      TPUs and XLA); None leaves batches unpadded.
    join: The layout model's join (`hparams.JOINS`).
    shard: (count, index): this worker's share of the examples (`batch_size`
      is then per worker), see `read_records`.
  """
  ds = train_examples(files, kind, k, shuffle_files=True, seed=seed,
                      shard=shard)
  if repeat:
    # After the cutting: an infinite dataset, which distribution
    # strategies read without partial-batch handling.
    ds = ds.repeat()
  ds = ds.shuffle(shuffle_buffer, seed=seed).batch(batch_size,
                                                   drop_remainder=True)

  def prepare(batch):
    graph = batch.merge_batch_to_components()
    labels = ranking.labels(kind, graph, k)
    model_graph = graph_ops.expand(kind, graph, join)
    if size_constraints is not None:
      model_graph, _ = tfgnn.pad_to_total_sizes(model_graph, size_constraints)
    return model_graph, labels

  return ds.map(plain_graph_fn(prepare),
                num_parallel_calls=tf.data.AUTOTUNE).prefetch(2)


def scan_examples(files: Sequence[str], kind: str, k: int,
                  join: str = hparams.JOINS[0]) -> tuple[int, tuple]:
  """One pass over the train examples (records cut into chunks of k): the
  example count and the largest sizes.

  Returns:
    (examples, (components, {node set: nodes}, {edge set: edges})) where
    each size is the largest any single example has after expansion.
  """
  # Sizes are computed inside tf.data (parallel, no GraphTensor reaches
  # Python) and reduced in-graph: this pass runs before every training.
  # The set names come from the expanded graph's spec: nothing is parsed.
  expand = plain_graph_fn(lambda g: graph_ops.expand(
      kind, g.merge_batch_to_components(), join))
  chunks = train_examples(files, kind, k).batch(1)
  spec = chunks.map(expand).element_spec
  node_sets = sorted(spec.node_sets_spec)
  edge_sets = sorted(spec.edge_sets_spec)

  def sizes(batch):
    g = expand(batch)
    return tf.stack([tf.cast(g.num_components, tf.int64)] +
                    [tf.cast(g.node_sets[n].total_size, tf.int64)
                     for n in node_sets] +
                    [tf.cast(g.edge_sets[e].total_size, tf.int64)
                     for e in edge_sets])

  ds = chunks.map(plain_graph_fn(sizes), num_parallel_calls=tf.data.AUTOTUNE,
                  deterministic=False)
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
                         k: int, join: str = hparams.JOINS[0]
                         ) -> tfgnn.SizeConstraints:
  """Totals that fit any batch of `batch_size` examples of these files."""
  return constraints_for(scan_examples(files, kind, k, join)[1], batch_size)
