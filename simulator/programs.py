"""Synthetic HLO programs: realistic op mixes, shapes, types and layouts.

Two generators:

* `whole_program` builds a whole model (layout collections): CNN, MLP or
  transformer blocks of dots, convolutions, elementwise chains, reductions,
  reshapes/transposes and broadcasts, each block its own computation (the
  `node_splits`), outputs gathered in a root tuple;
* `kernel` builds one fused kernel (tile collection): parameters, an
  optional dot or convolution, an elementwise chain and an optional
  reduction, 2 to ~400 instructions.

Instructions are appended in topological order, so operands always precede
their consumers, as in TpuGraphs.
"""

import dataclasses

import numpy as np

from schemas.node_encoding import ConvDims, Instruction, Window

_UNARY = ("exponential", "tanh", "logistic", "negate", "abs", "rsqrt", "sqrt",
          "log", "convert")
_BINARY = ("add", "multiply", "subtract", "maximum", "minimum", "divide")
_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128)
_WIDTHS = (64, 96, 128, 192, 256, 384, 512, 768, 1000, 1024, 2048, 3072, 4096)
_CHANNELS = (3, 16, 24, 32, 48, 64, 96, 128, 160, 256, 320, 512)
_SPATIAL = (7, 14, 17, 28, 32, 56, 64, 112, 128, 224)
_SEQ = (32, 64, 128, 197, 256, 384, 512)


def default_layout(rank: int) -> tuple[int, ...]:
  """XLA's default minor_to_major: the last dimension is the most minor."""
  return tuple(range(rank - 1, -1, -1))


@dataclasses.dataclass
class Program:
  """A generated program: instructions plus computation boundaries.

  `node_splits` follows the official encoder: 0 first, then the node count
  at the end of each computation, the last one equal to the node count.
  """
  instructions: list[Instruction]
  node_splits: list[int]
  family: str


class _Builder:
  """Appends instructions, tracking computations."""

  def __init__(self, rng: np.random.Generator, etype: str):
    self.rng = rng
    self.etype = etype
    self.insts: list[Instruction] = []
    self.splits: list[int] = [0]
    self.num_params = 0

  def add(self, opcode, dims, operands=(), etype=None, **attrs) -> int:
    dims = tuple(int(d) for d in dims)
    self.insts.append(Instruction(
        opcode=opcode, element_type=etype or self.etype, dims=dims,
        layout=default_layout(len(dims)), operands=tuple(operands), **attrs))
    return len(self.insts) - 1

  def dims(self, i: int) -> tuple[int, ...]:
    return tuple(self.insts[i].dims)

  def param(self, dims, etype=None) -> int:
    self.num_params += 1
    return self.add("parameter", dims, etype=etype,
                    parameter_number=self.num_params - 1)

  def computation(self):
    if len(self.insts) > self.splits[-1]:
      self.splits.append(len(self.insts))

  # Building blocks -------------------------------------------------------

  def constant_like(self, x: int) -> int:
    c = self.add("constant", ())
    return self.add("broadcast", self.dims(x), (c,), dimensions=())

  def unary(self, x: int, op=None) -> int:
    op = op or self.rng.choice(_UNARY)
    return self.add(op, self.dims(x), (x,))

  def binary(self, x: int, y: int, op=None) -> int:
    op = op or self.rng.choice(_BINARY)
    return self.add(op, self.dims(x), (x, y))

  def elementwise_chain(self, x: int, length: int) -> int:
    for _ in range(length):
      if self.rng.random() < 0.5:
        x = self.unary(x)
      else:
        x = self.binary(x, self.constant_like(x))
    return x

  def bias_add(self, x: int) -> int:
    d = self.dims(x)
    b = self.param((d[-1],))
    bb = self.add("broadcast", d, (b,), dimensions=(len(d) - 1,))
    return self.add("add", d, (x, bb))

  def dense(self, x: int, out: int) -> int:
    d = self.dims(x)
    w = self.param((d[-1], out))
    y = self.add("dot", d[:-1] + (out,), (x, w))
    return self.bias_add(y)

  def activation(self, x: int) -> int:
    kind = self.rng.integers(3)
    if kind == 0:  # ReLU
      return self.add("maximum", self.dims(x), (x, self.constant_like(x)))
    if kind == 1:  # GELU (tanh form)
      t = self.add("multiply", self.dims(x), (x, self.constant_like(x)))
      t = self.add("tanh", self.dims(x), (t,))
      t = self.add("add", self.dims(x), (t, self.constant_like(x)))
      return self.add("multiply", self.dims(x), (x, t))
    return self.add("logistic", self.dims(x), (x,))

  def reduce_last(self, x: int, op="add") -> int:
    del op  # The reducer computation is not part of the features.
    d = self.dims(x)
    init = self.add("constant", ())
    return self.add("reduce", d[:-1], (x, init), dimensions=(len(d) - 1,))

  def broadcast_back(self, r: int, dims) -> int:
    rank = len(dims)
    return self.add("broadcast", dims, (r,), dimensions=tuple(range(rank - 1)))

  def layer_norm(self, x: int) -> int:
    d = self.dims(x)
    mean = self.broadcast_back(self.reduce_last(x), d)
    c = self.add("subtract", d, (x, mean))
    var = self.reduce_last(self.add("multiply", d, (c, c)))
    inv = self.add("rsqrt", self.dims(var), (var,))
    y = self.add("multiply", d, (c, self.broadcast_back(inv, d)))
    g = self.param((d[-1],))
    y = self.add("multiply", d, (y, self.add("broadcast", d, (g,),
                                             dimensions=(len(d) - 1,))))
    return self.bias_add(y)

  def softmax(self, x: int) -> int:
    d = self.dims(x)
    m = self.broadcast_back(self.reduce_last(x, "max"), d)
    e = self.add("exponential", d, (self.add("subtract", d, (x, m)),))
    s = self.broadcast_back(self.reduce_last(e), d)
    return self.add("divide", d, (e, s))

  def conv(self, x: int, cout: int, k: int, stride: int) -> int:
    b, h, w, cin = self.dims(x)
    kern = self.param((k, k, cin, cout))
    pad = k // 2
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    window = Window(size=(k, k), stride=(stride, stride),
                    padding_low=(pad, pad), padding_high=(pad, pad),
                    dilation=(1, 1), base_dilation=(1, 1),
                    reversal=(False, False))
    cd = ConvDims(0, 3, (1, 2), 2, 3, (0, 1), 0, 3)
    return self.add("convolution", (b, oh, ow, cout), (x, kern),
                    window=window, conv_dims=cd, feature_group_count=1,
                    batch_group_count=1)

  def pool(self, x: int) -> int:
    b, h, w, c = self.dims(x)
    init = self.add("constant", ())
    window = Window(size=(1, 2, 2, 1), stride=(1, 2, 2, 1),
                    padding_low=(0,) * 4, padding_high=(0,) * 4,
                    dilation=(1,) * 4, base_dilation=(1,) * 4,
                    reversal=(False,) * 4)
    return self.add("reduce-window", (b, max(h // 2, 1), max(w // 2, 1), c),
                    (x, init), window=window)

  def attention(self, x: int, heads: int) -> int:
    b, s, h = self.dims(x)
    hd = max(h // heads, 1)
    parts = []
    for _ in range(3):
      p = self.dense(x, heads * hd)
      p = self.add("reshape", (b, s, heads, hd), (p,))
      parts.append(self.add("transpose", (b, heads, s, hd), (p,),
                            dimensions=(0, 2, 1, 3)))
    q, k, v = parts
    scores = self.add("dot", (b, heads, s, s), (q, k))
    scores = self.add("divide", (b, heads, s, s),
                      (scores, self.constant_like(scores)))
    probs = self.softmax(scores)
    ctx = self.add("dot", (b, heads, s, hd), (probs, v))
    ctx = self.add("transpose", (b, s, heads, hd), (ctx,),
                   dimensions=(0, 2, 1, 3))
    ctx = self.add("reshape", (b, s, heads * hd), (ctx,))
    out = self.dense(ctx, h)
    return self.layer_norm(self.add("add", (b, s, h), (x, out)))

  def finish(self, outputs: list[int]):
    """Gathers outputs in a root tuple."""
    self.computation()
    root = self.add("tuple", (), outputs, etype="tuple",
                    tuple_size=len(outputs))
    self.insts[root].is_root = True


def _pick(rng, values):
  return values[int(rng.integers(len(values)))]


def whole_program(rng: np.random.Generator, target_nodes: int,
                  source: str) -> Program:
  """Builds a whole model of about `target_nodes` instructions.

  Args:
    rng: Random generator (all randomness comes from it).
    target_nodes: Approximate size; blocks are added until it is reached.
    source: "xla" (vision models and MLPs mostly) or "nlp" (transformers).

  Returns:
    The program.
  """
  family = ("transformer" if source == "nlp" else
            _pick(rng, ("cnn", "cnn", "mlp", "transformer")))
  etype = "bf16" if rng.random() < 0.6 else "f32"
  bld = _Builder(rng, etype)
  batch = _pick(rng, _BATCHES)
  outputs = []
  if family == "cnn":
    hw = _pick(rng, _SPATIAL[3:])
    x = bld.param((batch, hw, hw, _pick(rng, (1, 3, 3, 4))))
    while len(bld.insts) < target_nodes:
      bld.computation()
      stride = 2 if (rng.random() < 0.25 and bld.dims(x)[1] > 7) else 1
      y = bld.conv(x, _pick(rng, _CHANNELS[1:]), _pick(rng, (1, 3, 3, 5)),
                   stride)
      y = bld.activation(bld.bias_add(y))
      if bld.dims(y) == bld.dims(x) and rng.random() < 0.5:
        y = bld.add("add", bld.dims(y), (x, y))  # Residual.
      if rng.random() < 0.15 and bld.dims(y)[1] > 2:
        y = bld.pool(y)
      if rng.random() < 0.1:
        y = bld.add("copy", bld.dims(y), (y,))
      x = y
    b, h, w, c = bld.dims(x)
    init = bld.add("constant", ())
    x = bld.add("reduce", (b, c), (x, init), dimensions=(1, 2))
    outputs.append(bld.dense(x, _pick(rng, (10, 100, 1000))))
  else:
    if family == "transformer":
      seq, hidden = _pick(rng, _SEQ), _pick(rng, (128, 256, 512, 768, 1024))
      ids = bld.param((batch, seq), etype="s32")
      table = bld.param((_pick(rng, (30522, 32000, 50257)), hidden))
      x = bld.add("gather", (batch, seq, hidden), (table, ids))
    else:
      x = bld.param((batch, _pick(rng, _WIDTHS)))
    while len(bld.insts) < target_nodes:
      bld.computation()
      if family == "transformer":
        x = bld.attention(x, _pick(rng, (2, 4, 8, 12, 16)))
        y = bld.activation(bld.dense(x, bld.dims(x)[-1] * 4))
        y = bld.dense(y, bld.dims(x)[-1])
        x = bld.layer_norm(bld.add("add", bld.dims(x), (x, y)))
      else:
        x = bld.activation(bld.dense(x, _pick(rng, _WIDTHS)))
        if rng.random() < 0.3:
          x = bld.elementwise_chain(x, int(rng.integers(1, 4)))
      if rng.random() < 0.1:
        outputs.append(bld.reduce_last(x))
    outputs.append(x)
  bld.finish(outputs)
  bld.computation()  # The closing boundary.
  return Program(bld.insts, bld.splits, family)


def kernel(rng: np.random.Generator, target_nodes: int) -> Program:
  """Builds one fused TPU kernel of about `target_nodes` instructions.

  The root is the kernel's output; its shape is what tile sizes tile.
  """
  etype = "bf16" if rng.random() < 0.5 else "f32"
  bld = _Builder(rng, etype)
  # Shares shaped by the real kernels (benchmarks/bench_realism): many read
  # several operands and move data; some are a lone copy or reshape.
  kind = _pick(rng, ("dot", "conv", "elementwise", "elementwise", "reduce",
                     "copy"))
  if kind == "conv":
    hw = _pick(rng, _SPATIAL)
    x = bld.param((_pick(rng, _BATCHES[:6]), hw, hw, _pick(rng, _CHANNELS)))
    x = bld.conv(x, _pick(rng, _CHANNELS[1:]), _pick(rng, (1, 3, 5)), 1)
  elif kind == "dot":
    rank = int(rng.integers(2, 4))
    lead = tuple(_pick(rng, _BATCHES) for _ in range(rank - 2))
    m, k, n = (_pick(rng, _WIDTHS + _SEQ) for _ in range(3))
    a = bld.param(lead + (m, k))
    w = bld.param((k, n))
    x = bld.add("dot", lead + (m, n), (a, w))
  else:
    rank = int(rng.integers(2, 5))
    dims = tuple(_pick(rng, _BATCHES + _SPATIAL) for _ in range(rank - 1)) + (
        _pick(rng, _WIDTHS + _CHANNELS),)
    x = bld.param(dims)
  if kind == "copy":  # A lone layout change: parameter -> copy/transpose.
    d = bld.dims(x)
    if rng.random() < 0.5:
      x = bld.add("copy", d, (x,))
    else:
      x = bld.add("transpose", d[:-2] + (d[-1], d[-2]), (x,),
                  dimensions=tuple(range(len(d) - 2)) + (len(d) - 1,
                                                         len(d) - 2))
    target_nodes = 0
  elif kind in ("dot", "conv"):  # Real matmul kernels fuse their epilogue.
    target_nodes = max(target_nodes, 16)
  while len(bld.insts) < max(target_nodes - 2, 2):
    r = rng.random()
    if r < 0.1:
      x = bld.unary(x)
    elif r < 0.6:
      d = bld.dims(x)
      if rng.random() < 0.3:  # An operand read through a transpose.
        t = bld.param(d[:-2] + (d[-1], d[-2]))
        other = bld.add("transpose", d, (t,), dimensions=tuple(
            range(len(d) - 2)) + (len(d) - 1, len(d) - 2))
      else:
        other = bld.param(d) if rng.random() < 0.85 else bld.constant_like(x)
      x = bld.binary(x, other)
    elif r < 0.85:
      x = bld.bias_add(x)
    else:
      x = bld.add("convert", bld.dims(x), (x,),
                  etype="f32" if bld.etype == "bf16" else "bf16")
  if kind == "reduce" and len(bld.dims(x)) > 2:
    x = bld.reduce_last(x)
  bld.insts[x].is_root = True
  bld.computation()  # The closing boundary.
  return Program(bld.insts, bld.splits, kind)
