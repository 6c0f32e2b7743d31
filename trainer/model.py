"""The config-ranking GNN: encoders, message passing, per-config readout.

Input: the expanded graph of `graph_ops.expand` (padded or not). Output: a
dict with one relevance score per config (higher = predicted faster; the
exported signature turns it into "lower = faster"), plus `example` and `slot`
that place each score in its example.

* Layout, late join (the default, `join="late"`): the graph's ops are
  encoded from their features and the compiler default's `phys`, message
  passing runs once per graph, and each config is scored from the rows of
  the ops it can change (`config_rows`), each reading its op's final state
  (`StaticOpEncoder`, `LateLayoutReadout`). Per config the cost is a few
  dense layers over those rows, not message passing over the graph.
* Ops are encoded from an opcode embedding and their 140 features, signed-log
  transformed and standardised with statistics of the train split (stored in
  the model as constants). Early join (`join="early"`): layout copies
  also read, at configurable ops, each of the 18 config values one-hot
  (-1..5), and at every
  op `phys`: what the chosen layouts mean physically at every op they
  reach (see `graph_ops.expand_layout`). The config-free part is encoded
  once per example and shared by its K copies (`LayoutEncoder`).
* Message passing: `layers` rounds of GraphSAGE, GATv2 or MtAlbis over `feed`
  (along the data flow) and `rev` (against it).
* Layout readout: a scalar contribution per op, averaged per component
  (= config), as runtimes sum over ops: an MLP of the op's state plus rates
  (linear in the state) times the op's `cost_scale` sizes, as costs grow
  linearly with the bytes an op or a copy moves. Both layout joins learn
  the chip's propagation rule (`learned_propagation`: the features come
  under each) and memory tiling (`learned_tiling`): `phys` and the sizes
  are padded under it. Tile readout: mean and max of the
  op states, broadcast to every config node, joined with the config's
  features, through an MLP.
* `gnn="none"` with `config_only=True` is the no-graph baseline: it scores a
  config from its own features alone.
"""

import dataclasses

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn.models import gat_v2
from tensorflow_gnn.models import graph_sage
from tensorflow_gnn.models import mt_albis

from schemas import opcodes
from trainer import layout_features
from trainer import learned_propagation
from trainer import learned_tiling
from trainer import ranking
from trainer.hparams import GNNS
from trainer.hparams import ModelConfig

@dataclasses.dataclass
class FeatureStats:
  """Mean and variance of signed-log features on the train split."""
  node_mean: np.ndarray
  node_var: np.ndarray
  config_mean: np.ndarray  # Tile config features (zeros for layout).
  config_var: np.ndarray

  def to_json(self) -> dict:
    return {k: np.asarray(v).tolist() for k, v in dataclasses.asdict(
        self).items()}

  @classmethod
  def from_json(cls, d: dict) -> "FeatureStats":
    return cls(**{k: np.asarray(v, np.float32) for k, v in d.items()})


def signed_log(x):
  """log1p of magnitudes, keeping the sign: tames products of dims."""
  return tf.sign(x) * tf.math.log1p(tf.abs(x))


Z_CLIP = 8.0  # Standardised features are clipped to [-Z_CLIP, Z_CLIP].


class SignedLogNormalization(tf.keras.layers.Layer):
  """Signed log, then standardisation with fixed train statistics.

  Init args:
    mean: [F] mean of the signed-log features.
    variance: [F] their variance.

  Call returns:
    The standardised [N, F] features, clipped to [-Z_CLIP, Z_CLIP].
  """

  def __init__(self, mean, variance, **kwargs):
    super().__init__(**kwargs)
    self._norm = tf.keras.layers.Normalization(
        mean=np.asarray(mean, np.float32), variance=np.asarray(
            variance, np.float32))

  def call(self, x):
    # Clipped: a graph unlike the train split (e.g. real HLO after
    # simulated training) must not push every score into the bound.
    return tf.clip_by_value(self._norm(signed_log(x)), -Z_CLIP, Z_CLIP)


def _config_onehot(feat):
  """[R, 18] layout config values (-1..5) -> [R, 18 * 7] one-hot."""
  values = tf.cast(tf.round(feat), tf.int32) + 1
  return tf.reshape(tf.one_hot(values, 7), [-1, 18 * 7])


class LayoutRules(tf.keras.layers.Layer):
  """What a layout model learns of the chip: its propagation rule
  (`learned_propagation`), then its tiling (`learned_tiling`).

  Call args:
    phys: The `phys` features (under every propagation rule).
    cost_scale: Optional `cost_scale` (under every propagation rule).

  Call returns:
    As `learned_tiling.LearnedTiling` of what the rule's features are.
  """

  def __init__(self, **kwargs):
    super().__init__(**kwargs)
    self._propagation = learned_propagation.LearnedPropagation(
        name="propagation")
    self._tiling = learned_tiling.LearnedTiling(name="tiling")

  def call(self, phys, cost_scale=None):
    if cost_scale is None:
      return self._tiling(self._propagation(phys))
    return self._tiling(*self._propagation(phys, cost_scale))


class LayoutEncoder(tf.keras.layers.Layer):
  """Initial op states of the config copies of a layout graph.

  The state of an op copy is relu(A x + B p + C c + b) over the op's
  config-free features x (normalised features and opcode embedding), its
  `phys` features p and, at configurable ops, its config's one-hot values c
  (the early join). That is one Dense layer over their concatenation, but
  A x is computed once per example on `source_op` and sent to the K copies
  over `copies` edges, and C c only on the `node_config` rows (over
  `configures` edges): most of the input width is the same in every copy
  or zero outside the few configurable ops.

  Init args:
    hidden: State width.
    node_norm: SignedLogNormalization of the 140 node features.
    opcode_dim: Opcode embedding width.
    rules: The model's `LayoutRules`, which `phys` goes
      through.
    config_only: Read the config values alone (the no-graph baseline).

  Call returns:
    A GraphTensor with the context, "op" (its hidden state) and the "feed"
    and "rev" edges: what message passing runs on.
  """

  def __init__(self, hidden: int, node_norm: tf.keras.layers.Layer,
               opcode_dim: int, rules: tf.keras.layers.Layer,
               config_only: bool = False, **kwargs):
    super().__init__(**kwargs)
    self._config_only = config_only
    self._node_norm = node_norm
    self._rules = rules
    self._embed = tf.keras.layers.Embedding(opcodes.NUM_OPCODE_IDS,
                                            opcode_dim,
                                            name="opcode_embedding")
    self._source = tf.keras.layers.Dense(hidden, use_bias=False,
                                         name="source_encoder")
    self._phys = tf.keras.layers.Dense(hidden, use_bias=False,
                                       name="phys_encoder")
    # Its bias is added once per configurable op: the "is configurable" flag.
    self._config = tf.keras.layers.Dense(hidden, name="config_encoder")
    self._bias = self.add_weight(name="bias", shape=[hidden],
                                 initializer="zeros")

  def call(self, graph):
    op = graph.node_sets["op"]

    def to_copies(edge_set, value):
      return tfgnn.pool_edges_to_node(
          graph, edge_set, tfgnn.TARGET, "sum",
          feature_value=tfgnn.broadcast_node_to_edges(
              graph, edge_set, tfgnn.SOURCE, feature_value=value))

    state = to_copies("configures", self._config(_config_onehot(
        graph.node_sets["node_config"]["feat"])))
    if not self._config_only:
      source = graph.node_sets["source_op"]
      free = self._source(tf.concat([
          self._node_norm(source["feat"]),
          self._embed(tf.cast(source["opcode"], tf.int32))], axis=-1))
      state += (to_copies("copies", free) +
                self._phys(self._rules(op["phys"])))
    state = tf.nn.relu(state + self._bias)
    return tfgnn.GraphTensor.from_pieces(
        context=graph.context,
        node_sets={"op": tfgnn.NodeSet.from_fields(
            sizes=op.sizes, features={tfgnn.HIDDEN_STATE: state})},
        edge_sets={e: graph.edge_sets[e] for e in ("feed", "rev")})


# Scores are squashed into (-SCORE_BOUND, SCORE_BOUND): monotone, so rankings
# are unchanged, but listwise losses can no longer push scores apart until
# exp() underflows (ListMLE then returns -inf).
SCORE_BOUND = 20.0


def _bounded(x):
  return SCORE_BOUND * tf.tanh(x / SCORE_BOUND)


def _mlp(hidden: int, dropout: float, name: str) -> tf.keras.Sequential:
  return tf.keras.Sequential([
      tf.keras.layers.Dense(hidden, "relu"),
      tf.keras.layers.Dropout(dropout),
      tf.keras.layers.Dense(hidden // 2, "relu"),
      tf.keras.layers.Dense(1),
  ], name=name)


def _gnn_layer(cfg: ModelConfig, i: int) -> tf.keras.layers.Layer:
  """One round of message passing into "op" over "feed" and "rev"."""
  if cfg.gnn == "sage":
    return graph_sage.GraphSAGEGraphUpdate(
        units=cfg.hidden, receiver_tag=tfgnn.TARGET, node_set_names=["op"],
        reduce_type="mean", use_pooling=False, l2_normalize=False,
        dropout_rate=cfg.dropout,
        name=f"sage_{i}")
  if cfg.gnn == "gatv2":
    convs = {e: gat_v2.GATv2Conv(num_heads=cfg.heads,
                                 per_head_channels=cfg.hidden // cfg.heads,
                                 receiver_tag=tfgnn.TARGET)
             for e in ("feed", "rev")}
    return tfgnn.keras.layers.GraphUpdate(node_sets={
        "op": tfgnn.keras.layers.NodeSetUpdate(
            convs, tfgnn.keras.layers.NextStateFromConcat(
                tf.keras.layers.Dense(cfg.hidden, "relu")))},
                                          name=f"gatv2_{i}")
  if cfg.gnn == "mtalbis":
    return mt_albis.MtAlbisGraphUpdate(
        units=cfg.hidden, message_dim=cfg.hidden, receiver_tag=tfgnn.TARGET,
        node_set_names=["op"], state_dropout_rate=cfg.dropout,
        next_state_type="residual")
  raise ValueError(f"unknown gnn {cfg.gnn!r}; expected one of {GNNS}")


class LayoutReadout(tf.keras.layers.Layer):
  """Per-component score as a sum of per-op contributions.

  A layout config's runtime is a sum over ops (each op's roofline plus the
  copies on its edges), so each op's final state is mapped to a scalar
  contribution, aggregated per component (= config). The mean is used: all
  copies of a graph have the same op count, so it ranks like the sum but
  stays in range whatever the graph size. Ops a config does not touch add
  the same amount to every config of the graph, which ranking ignores.

  An op's contribution is mlp(h) + sum_j rate_j(h) * cost_scale_j: the
  sizes in `cost_scale` (see `layout_features.cost_scales`) enter linearly, the
  state only sets their rates. A copy on an edge 100 times the graph's mean
  size then costs 100 times more, which an MLP of log sizes only
  approximates.

  Init args:
    hidden: MLP width.
    dropout: MLP dropout.
    rules: The model's `LayoutRules`, which pads the
      sizes.
    linear_costs: Add the rate x size terms (off for the config-only
      baseline: where copies run is a fact of the graph).

  Call returns:
    {"scores": [components], "example", "slot"} for the expanded graph.
  """

  def __init__(self, hidden: int, dropout: float,
               rules: tf.keras.layers.Layer, linear_costs: bool = True,
               **kwargs):
    super().__init__(**kwargs)
    self._mlp = _mlp(hidden, dropout, "layout_head")
    self._rules = rules
    self._linear_costs = linear_costs
    if linear_costs:
      # Zero rates at the start: sizes reach 1e3 times the graph's mean, and
      # random rates would saturate the bounded scores (no gradient).
      self._rates = tf.keras.layers.Dense(layout_features.COST_SCALE_WIDTH,
                                          kernel_initializer="zeros",
                                          name="cost_rates")

  def call(self, graph, inputs):
    """Scores from the final `graph` states; `inputs` has the config slots."""
    h = graph.node_sets["op"][tfgnn.HIDDEN_STATE]
    contribution = self._mlp(h)
    if self._linear_costs:
      # Cost = rate x size: the state sets the rate, the size stays linear.
      op = inputs.node_sets["op"]
      _, cost_scale = self._rules(op["phys"], op["cost_scale"])
      contribution += tf.reduce_sum(self._rates(h) * cost_scale, axis=1,
                                    keepdims=True)
    total = tfgnn.pool_nodes_to_context(graph, "op", "mean",
                                        feature_value=contribution)[:, 0]
    return {"scores": _bounded(total), "example": inputs.context["example"],
            "slot": inputs.context["slot"]}


class StaticOpEncoder(tf.keras.layers.Layer):
  """Initial op states of a late-join layout graph (`config_rows`).

  relu(Dense) of the op's normalised features, opcode embedding and `phys`
  under the compiler default: config-free, so computed once per graph.

  Init args:
    hidden: State width.
    node_norm: SignedLogNormalization of the 140 node features.
    opcode_dim: Opcode embedding width.
    rules: The model's `LayoutRules`, which `phys` goes
      through.

  Call returns:
    A GraphTensor with the context, "op" (its hidden state) and the "feed"
    and "rev" edges: what message passing runs on.
  """

  def __init__(self, hidden: int, node_norm: tf.keras.layers.Layer,
               opcode_dim: int, rules: tf.keras.layers.Layer, **kwargs):
    super().__init__(**kwargs)
    self._node_norm = node_norm
    self._rules = rules
    self._embed = tf.keras.layers.Embedding(opcodes.NUM_OPCODE_IDS,
                                            opcode_dim,
                                            name="opcode_embedding")
    self._dense = tf.keras.layers.Dense(hidden, "relu", name="op_encoder")

  def call(self, graph):
    op = graph.node_sets["op"]
    state = self._dense(tf.concat([
        self._node_norm(op["feat"]),
        self._embed(tf.cast(op["opcode"], tf.int32)),
        self._rules(op["phys"])], axis=-1))
    return tfgnn.GraphTensor.from_pieces(
        context=graph.context,
        node_sets={"op": tfgnn.NodeSet.from_fields(
            sizes=op.sizes, features={tfgnn.HIDDEN_STATE: state})},
        edge_sets={e: graph.edge_sets[e] for e in ("feed", "rev")})


class LateLayoutReadout(tf.keras.layers.Layer):
  """Per-config score from the ops the config can change (late join).

  Each "config_op" row (one op of `config_rows`' R under the configs that
  agree on the values it depends on) gets
  the state relu(A h + B p + C c + b): its op's final state h from the
  message passing that ran once per graph, the row's `phys` p and, at
  configurable ops, the config's one-hot values c. As in `LayoutReadout`,
  its contribution is mlp(state) + sum_j rate_j(state) * cost_scale_j, and
  a config's score is the sum over its rows (one per op of R, along its
  `adds_to` edges) divided by the graph's op count: the mean over all ops
  up to a per-graph constant (the ops outside R add the same to every
  config). Configs sharing a row share its dropout mask in training.

  Init args:
    hidden: MLP width; rows have half of it.
    dropout: MLP dropout.
    rules: The model's `LayoutRules`, which `phys` goes
      through and pads the sizes.
    config_only: Read the config values alone (the no-graph baseline): no
      op state, no `phys`, no rate x size terms.

  Call returns:
    {"scores": [components], "example", "slot"}.
  """

  def __init__(self, hidden: int, dropout: float,
               rules: tf.keras.layers.Layer, config_only: bool = False,
               **kwargs):
    super().__init__(**kwargs)
    width = max(hidden // 2, 8)
    self._config_only = config_only
    self._rules = rules
    self._from_op = tf.keras.layers.Dense(width, use_bias=False,
                                          name="from_op")
    self._phys = tf.keras.layers.Dense(width, use_bias=False, name="phys")
    # Its bias is added once per configurable row: the "is configurable" flag.
    self._config = tf.keras.layers.Dense(width, name="config_encoder")
    self._bias = self.add_weight(name="bias", shape=[width],
                                 initializer="zeros")
    self._mlp = _mlp(width, dropout, "layout_head")
    if not config_only:
      self._rates = tf.keras.layers.Dense(layout_features.COST_SCALE_WIDTH,
                                          kernel_initializer="zeros",
                                          name="cost_rates")

  def call(self, graph, inputs):
    """Scores from the final op states of `graph` and the rows of `inputs`."""
    rows = inputs.node_sets["config_op"]
    cfg = rows["cfg"]
    flag = cfg[:, layout_features.CONFIGURABLE:]
    state = self._config(_config_onehot(
        cfg[:, :layout_features.CONFIGURABLE])) * flag + self._bias
    if not self._config_only:
      h = self._from_op(graph.node_sets["op"][tfgnn.HIDDEN_STATE])
      state += tfgnn.pool_edges_to_node(
          inputs, "reads", tfgnn.TARGET, "sum",
          feature_value=tfgnn.broadcast_node_to_edges(
              inputs, "reads", tfgnn.SOURCE, feature_value=h))
      phys, cost_scale = self._rules(rows["phys"], rows["cost_scale"])
      state += self._phys(phys)
    state = tf.nn.relu(state)
    contribution = self._mlp(state)
    if not self._config_only:
      contribution += tf.reduce_sum(self._rates(state) * cost_scale, axis=1,
                                    keepdims=True)
    # Rows are shared by the configs that agree on them: each config sums
    # its own along its `adds_to` edges.
    total = tfgnn.pool_edges_to_node(
        inputs, "adds_to", tfgnn.TARGET, "sum",
        feature_value=tfgnn.broadcast_node_to_edges(
            inputs, "adds_to", tfgnn.SOURCE, feature_value=contribution))
    total = tfgnn.pool_nodes_to_context(inputs, "config", "sum",
                                        feature_value=total)[:, 0]
    total /= tf.maximum(inputs.context["ops"], 1.0)
    return {"scores": _bounded(total), "example": inputs.context["example"],
            "slot": inputs.context["slot"]}


class TileReadout(tf.keras.layers.Layer):
  """Per-config score from the kernel's embedding and the config.

  Init args:
    hidden: MLP width.
    dropout: MLP dropout.
    use_graph: False for the config-only baseline.

  Call returns:
    {"scores": [config nodes], "example", "slot"}.
  """

  def __init__(self, hidden: int, dropout: float, use_graph: bool = True,
               **kwargs):
    super().__init__(**kwargs)
    self._mlp = _mlp(hidden, dropout, "tile_head")
    self._use_graph = use_graph

  def call(self, graph, inputs):
    """Scores from the final `graph` states; `inputs` has the config slots."""
    config = graph.node_sets["config"]
    slots = inputs.node_sets["config"]
    parts = [config[tfgnn.HIDDEN_STATE]]
    if self._use_graph:
      h = graph.node_sets["op"][tfgnn.HIDDEN_STATE]
      pooled = tf.concat([
          tfgnn.pool_nodes_to_context(graph, "op", "mean", feature_value=h),
          tfgnn.pool_nodes_to_context(graph, "op", "max_no_inf",
                                      feature_value=h)], axis=-1)
      parts.append(tfgnn.broadcast_context_to_nodes(graph, "config",
                                                    feature_value=pooled))
    score = _bounded(self._mlp(tf.concat(parts, axis=-1))[:, 0])
    return {"scores": score, "example": slots["example"],
            "slot": slots["slot"]}


def _tile_encoder(cfg: ModelConfig, node_norm: tf.keras.layers.Layer,
                  stats: FeatureStats) -> tf.keras.layers.Layer:
  """Initial states of a tile graph: its ops and its config nodes."""
  config_norm = SignedLogNormalization(stats.config_mean, stats.config_var,
                                       name="config_norm")
  embed = tf.keras.layers.Embedding(opcodes.NUM_OPCODE_IDS, cfg.opcode_dim,
                                    name="opcode_embedding")
  op_dense = tf.keras.layers.Dense(cfg.hidden, "relu", name="op_encoder")
  config_dense = tf.keras.layers.Dense(cfg.hidden, "relu",
                                       name="config_encoder")

  def init_node(node_set, *, node_set_name):
    if node_set_name == "op":
      if cfg.config_only:  # Ops are unused.
        return tf.zeros_like(node_set["feat"][:, :1])
      return op_dense(tf.concat([
          node_norm(node_set["feat"]),
          embed(tf.cast(node_set["opcode"], tf.int32))], axis=-1))
    if node_set_name == "config":
      parts = [config_norm(node_set["feat"])]
      if not cfg.config_only:  # phys also reads the kernel's output shape.
        parts.append(node_set["phys"])
      return config_dense(tf.concat(parts, axis=-1))
    return None

  return tfgnn.keras.layers.MapFeatures(node_sets_fn=init_node)


# Layers are traced as written (see input_fn.plain_graph_fn).
@tf.autograph.experimental.do_not_convert
def build_score_model(cfg: ModelConfig, input_spec: tfgnn.GraphTensorSpec,
                      stats: FeatureStats) -> tf.keras.Model:
  """Builds the Keras model: expanded graph -> per-config scores.

  Args:
    cfg: Hyperparameters.
    input_spec: Spec of the (expanded, merged) input graph.
    stats: Train-split feature statistics for the standardisation.

  Returns:
    A Keras model with a GraphTensor input and a dict output.
  """
  node_norm = SignedLogNormalization(stats.node_mean, stats.node_var,
                                     name="node_norm")
  inputs = tf.keras.layers.Input(type_spec=input_spec)
  layout = cfg.kind == "layout"
  late = layout and cfg.join == "late"
  # One propagation rule and tiling for the whole model: the chip's.
  rules = LayoutRules(name="layout_rules")
  if late:
    graph = StaticOpEncoder(cfg.hidden, node_norm, cfg.opcode_dim, rules,
                            name="op_encoder")(inputs)
  elif layout:
    graph = LayoutEncoder(cfg.hidden, node_norm, cfg.opcode_dim, rules,
                          config_only=cfg.config_only,
                          name="layout_encoder")(inputs)
  else:
    graph = _tile_encoder(cfg, node_norm, stats)(inputs)
  use_graph = not cfg.config_only and cfg.gnn != "none"
  if use_graph:
    for i in range(cfg.layers):
      graph = _gnn_layer(cfg, i)(graph)
  if late:
    out = LateLayoutReadout(cfg.hidden, cfg.dropout, rules,
                            config_only=cfg.config_only,
                            name="readout")(graph, inputs)
  elif layout:
    # The config-only baseline must not see where copies run (graph facts).
    out = LayoutReadout(cfg.hidden, cfg.dropout, rules,
                        linear_costs=not cfg.config_only,
                        name="readout")(graph, inputs)
  else:
    out = TileReadout(cfg.hidden, cfg.dropout, use_graph=not cfg.config_only,
                      name="readout")(graph, inputs)
  return tf.keras.Model(inputs, out, name=f"{cfg.kind}_ranker")


class RankingModel(tf.keras.Model):
  """Training wrapper: places flat scores into [batch, k] for the loss.

  Init args:
    score_model: From `build_score_model`.
    batch: Examples per (replica) batch.
    k: Configs per example.

  Call returns:
    [batch, k] scores aligned with the labels.
  """

  def __init__(self, score_model: tf.keras.Model, batch: int, k: int,
               **kwargs):
    super().__init__(**kwargs)
    self.score_model = score_model
    self._batch, self._k = batch, k

  # Traced as written (see input_fn.plain_graph_fn): AutoGraph would rewrite
  # every layer's call, TF-GNN's included, on each training start.
  @tf.autograph.experimental.do_not_convert
  def train_step(self, data):
    return super().train_step(data)

  def call(self, graph, training=False):
    out = self.score_model(graph, training=training)
    return ranking.scores_to_matrix(out["scores"], out["example"],
                                      out["slot"], self._batch, self._k)
