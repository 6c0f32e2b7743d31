"""Exports the model as a SavedModel in TF Serving's `<base>/<version>/` layout.

The `serving_default` signature takes `examples`, a [batch] string tensor of
serialized GraphTensor `tf.Example`s (one graph with K candidate configs
each, as conversion writes them) and returns:

* `scores` [batch, K_max] float32: lower = predicted faster (entries past an
  example's own K are 0 and have config_index -1);
* `config_index` [batch, K_max] int64: each score's config index in the npz.

The `rank` signature takes one graph as plain tensors, the arrays of its
TpuGraphs npz (`graph_tensor.ARRAY_SPECS`: `node_feat`, `node_opcode`,
`edge_index`, and `node_config_ids` + `node_config_feat` for layout or
`config_feat` for tile, any number of configs), and returns `scores`
[configs] (lower = predicted faster). It prunes a layout graph with the
model's own hops (`conversion.prune.prune_arrays`; pruning a pruned graph
again changes nothing, so clients may prune first to send less), and runs
the configs in
chunks within the call budget (`call_cost`), so a request's memory is
bounded by its own arrays. A layout model also has `rank_packed`: the same,
with `node_config_bytes` (a string: node_config_feat as int8 bytes) in place
of `node_config_feat`, ~4x smaller on the wire and no numbers to parse. The
signatures refuse non-finite features and config values outside the format
(InvalidArgumentError naming the input: a 400 from a server).

Only standard TensorFlow ops are inside: loading and calling it needs neither
TF-GNN nor this package.
"""

import json
import os
from typing import Optional

import tensorflow as tf

from conversion import options
from conversion import prune
from schemas import features
from schemas import graph_tensor
from schemas import npz_format
from trainer import call_cost
from trainer import graph_ops
from trainer import hparams
from trainer import input_fn

METADATA_FILE = "tpurank_model.json"
RANK_SIGNATURE = "rank"  # One graph as plain tensors -> scores.
# `rank`, with a layout graph's config values sent as bytes: one int8 per
# value (they are -1..5), C order. As JSON (REST) that is a base64 string
# (TF Serving's {"b64": ...} for string inputs) of 1.33 bytes a value
# instead of ~5 bytes of text per number, which JSON parsers must read one
# by one.
RANK_PACKED_SIGNATURE = "rank_packed"
PACKED_CONFIG_INPUT = "node_config_bytes"


class ServingModule(tf.Module):
  """The serving signature: parsing, expansion and the score model.

  Only the model's variables are tracked, not the Keras model itself, so the
  SavedModel holds no TF-GNN types and loads with plain TensorFlow.

  Init args:
    score_model: From `trainer.model.build_score_model`.
    kind: "tile" or "layout".
    join: The layout model's join (`hparams.JOINS`).
    hops: The layout pruning hops the model was trained with (< 0: none).
  """

  def __init__(self, score_model: tf.keras.Model, kind: str,
               join: str = hparams.JOINS[0], hops: int = options.DEFAULT_HOPS):
    super().__init__()
    self.model_variables = list(score_model.variables)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string,
                                                name="examples")])
    def serve(examples):
      graph = input_fn.parse_batch(kind, examples)
      config_set = "config" if kind == npz_format.TILE else "node_config"
      for name, value in (("op.feat", graph.node_sets["op"]["feat"]),
                          (f"{config_set}.feat",
                           graph.node_sets[config_set]["feat"])):
        tf.debugging.assert_all_finite(
            value, f"{name}: expected finite values, found NaN or Inf")
      if kind == npz_format.LAYOUT:
        # A tile example parses with no node_config rows: refuse it rather
        # than answer with identical, meaningless scores.
        configs = graph.node_sets["config"].sizes
        rows = tf.math.unsorted_segment_sum(
            tf.ones_like(graph.edge_sets["part_of"].adjacency.target),
            graph.edge_sets["part_of"].adjacency.target,
            tf.reduce_sum(configs))
        tf.debugging.assert_positive(
            rows, "examples: a layout model takes layout examples (18 "
            "config values per configurable node); found a config without "
            "any (a tile example?)")
      out = score_model(graph_ops.expand(kind, graph, join),
                        training=False)
      config = graph.node_sets["config"]
      k_max = tf.reduce_max(tf.concat([tf.cast(config.sizes, tf.int32),
                                       [0]], 0))
      shape = tf.stack([tf.size(examples), k_max])
      where = tf.stack([out["example"], out["slot"] - 1], axis=1)
      scores = tf.scatter_nd(where, -out["scores"], shape)
      index = tf.scatter_nd(where, config["index"] + 1, shape) - 1
      return {"scores": scores, "config_index": index}

    self.serve = serve
    config_key = ("config_feat" if kind == npz_format.TILE
                  else "node_config_feat")

    def rank_arrays(arrays):
      # Layout config values are checked in the expansion
      # (`config_rows.check_config_values`: -1..5, so NaN and Inf too).
      for key in ("node_feat",) + (
          (config_key,) if kind == npz_format.TILE else ()):
        tf.debugging.assert_all_finite(
            arrays[key], f"{key}: expected finite values, found NaN or Inf")
      if kind == npz_format.LAYOUT and hops >= 0:
        arrays = prune.prune_arrays(arrays, hops)
      feat = arrays[config_key]
      configs = tf.shape(feat)[0]
      if kind == npz_format.LAYOUT:
        chunk = tf.cast(call_cost.configs_per_example(
            tf.cast(tf.shape(arrays["node_feat"])[0], tf.float32),
            tf.cast(tf.size(arrays["node_config_ids"]), tf.float32), join,
            budget=call_cost.OP_COPY_BUDGET,
            most=float(1 << 30), minimum=tf.minimum, maximum=tf.maximum),
                        tf.int32)
      else:
        chunk = tf.maximum(configs, 1)

      def body(i, scores):
        part = dict(arrays)
        part[config_key] = feat[i * chunk:(i + 1) * chunk]
        graph = graph_tensor.from_arrays(kind, part)
        out = score_model(graph_ops.expand(kind, graph, join),
                          training=False)
        return i + 1, scores.write(i, -out["scores"])

      chunks = (configs + chunk - 1) // chunk
      _, scores = tf.while_loop(
          lambda i, _: i < chunks, body,
          [0, tf.TensorArray(tf.float32, size=chunks, infer_shape=False,
                             element_shape=[None])])
      return {"scores": tf.cond(chunks > 0, scores.concat,
                                lambda: tf.zeros([0]))}

    specs = {k: tf.TensorSpec(v.shape, v.dtype, name=k)
             for k, v in graph_tensor.ARRAY_SPECS[kind].items()}
    self.rank_packed = None
    if kind == npz_format.LAYOUT:
      graph_inputs = ("node_feat", "node_opcode", "edge_index",
                      "node_config_ids")

      @tf.function(input_signature=[specs[k] for k in graph_inputs + (
          "node_config_feat",)])
      def rank(node_feat, node_opcode, edge_index, node_config_ids,
               node_config_feat):
        return rank_arrays(dict(
            node_feat=node_feat, node_opcode=node_opcode,
            edge_index=edge_index, node_config_ids=node_config_ids,
            node_config_feat=node_config_feat))

      @tf.function(input_signature=[specs[k] for k in graph_inputs] + [
          tf.TensorSpec([], tf.string, name=PACKED_CONFIG_INPUT)])
      def rank_packed(node_feat, node_opcode, edge_index, node_config_ids,
                      node_config_bytes):
        values = tf.io.decode_raw(node_config_bytes, tf.int8)
        row = tf.size(node_config_ids) * features.LAYOUT_CONFIG_FEATURES
        whole = tf.debugging.assert_equal(
            tf.size(values) % tf.maximum(row, 1), 0, message=(
                f"{PACKED_CONFIG_INPUT}: expected configs x "
                f"len(node_config_ids) x {features.LAYOUT_CONFIG_FEATURES} "
                "int8 values"))
        with tf.control_dependencies([whole]):
          configs = tf.size(values) // tf.maximum(row, 1)
        # A call of the traced `rank`: the model's graph is saved once.
        return rank(node_feat, node_opcode, edge_index, node_config_ids,
                    tf.reshape(tf.cast(values, tf.float32), [
                        configs, tf.size(node_config_ids),
                        features.LAYOUT_CONFIG_FEATURES]))

      self.rank_packed = rank_packed
    else:
      @tf.function(input_signature=[specs[k] for k in (
          "node_feat", "node_opcode", "edge_index", "config_feat")])
      def rank(node_feat, node_opcode, edge_index, config_feat):
        return rank_arrays(dict(
            node_feat=node_feat, node_opcode=node_opcode,
            edge_index=edge_index, config_feat=config_feat))
    self.rank = rank


def save(score_model: tf.keras.Model, kind: str, path: str,
         metadata: dict, join: str = hparams.JOINS[0]) -> str:
  """Writes the SavedModel (and its metadata) exactly at `path`.

  The directory appears only once complete (written aside, then renamed), so
  a server polling the base directory never loads a half-written model.
  """
  tmp = os.path.join(os.path.dirname(path.rstrip("/")),
                     f".tmp-{os.path.basename(path.rstrip('/'))}")
  if tf.io.gfile.exists(tmp):
    tf.io.gfile.rmtree(tmp)
  module = ServingModule(score_model, kind, join,
                         pruning_hops(path, metadata))
  signatures = {"serving_default": module.serve, RANK_SIGNATURE: module.rank}
  if module.rank_packed is not None:
    signatures[RANK_PACKED_SIGNATURE] = module.rank_packed
  tf.saved_model.save(module, tmp, signatures=signatures)
  # assets.extra/ is where TF Serving expects files it does not read.
  extra = os.path.join(tmp, "assets.extra")
  tf.io.gfile.makedirs(extra)
  name = os.path.basename(path.rstrip("/"))
  if name.isdigit():  # A numbered version of a model repository.
    metadata = dict(metadata, version=int(name))
  with tf.io.gfile.GFile(os.path.join(extra, METADATA_FILE), "w") as f:
    f.write(json.dumps(dict(metadata, kind=kind, join=join), indent=2))
  tf.io.gfile.rename(tmp, path, overwrite=False)
  return path


def pruning_hops(model_dir: str, metadata: Optional[dict] = None) -> int:
  """The layout pruning hops the model was trained with (its metadata, read
  unless given), so scoring prunes graphs as training did; the default if it
  records none."""
  if metadata is None:
    metadata = metadata_or_empty(model_dir)
  hops = metadata.get("hops")
  return options.DEFAULT_HOPS if hops is None else int(hops)


def model_join(metadata: dict) -> str:
  """A model's layout join (`hparams.JOINS`); models exported before the
  late join existed record none and are early-join."""
  return metadata.get("join", "early")


def metadata_or_empty(model_dir: str) -> dict:
  """`read_metadata`, or {} for a SavedModel that has none."""
  try:
    return read_metadata(model_dir)
  except (tf.errors.NotFoundError, OSError, ValueError):
    return {}


def read_metadata(model_dir: str) -> dict:
  """The metadata saved beside a SavedModel by `save`."""
  with tf.io.gfile.GFile(os.path.join(model_dir, "assets.extra",
                                      METADATA_FILE)) as f:
    return json.load(f)
