"""Analytical cost of a whole program under per-node layout configurations.

Model (all times in ns, constants from a `hardware.Chip`):

* Every op costs a roofline: max(bytes moved / bandwidth, flops / peak) plus
  a launch overhead. Bytes are counted on the *physical* shape: the most-minor
  dim of a layout pads to the chip's lanes (128 by default) and the
  second-minor to its sublanes (8), so a layout that puts
  a small dim (3 channels, batch 1) minor wastes most of the memory traffic.
* A configurable node (dot, convolution, reshape, transpose, copy) chooses
  its output layout (`out`), the layout it reads its first operand in
  (`in`) and, for dots and convolutions, its second operand (`kernel`).
  Layout -1 means the compiler default: for a dot's or convolution's `out`,
  the layout that is cheapest for the node's own region (a local heuristic,
  blind to consumers); for other ops' `out`, XLA's default layout; for
  `in`/`kernel`, whatever layout the operand already has.
* Elementwise consumers (the chip's `propagates` set) inherit their first
  operand's layout (layout propagation), so one `out` choice sets the layout
  of a whole region.
* Wherever a producer's layout and a consumer's required layout disagree, a
  copy/transpose runs on that edge: the tensor crosses memory `copy_passes`
  times more.
  Reductions over the most-minor dim pay a cross-lane penalty; ops outside any
  region (and program outputs) want XLA's default layout.
* Dots read fastest with the contracting dim minor, convolutions with the
  feature dim minor; other layouts slow the matrix unit down.

Because the cost of a choice depends on the region it sets and on what its
consumers want, the best configuration depends on the graph around the
configurable nodes, not on the config alone. The model is a sum of unary and
pairwise terms over choice variables, so 100k configs evaluate vectorised.
"""

import dataclasses
import functools
import itertools

import numpy as np

from schemas.node_encoding import Instruction
from simulator import hardware as hw
from simulator.programs import default_layout

CONFIGURABLE = frozenset(("dot", "convolution", "reshape", "transpose", "copy"))
_MAX_PERMS = 24  # Options per choice besides the default.


@dataclasses.dataclass
class Variable:
  """One layout choice: slot "out", "in" or "kernel" of configurable node k.

  Attributes:
    config_slot: Index k in node_config_ids.
    slot: 0 out, 1 in, 2 kernel (the 6-wide group in the 18 features).
    perms: Option j >= 1 is perms[j - 1] (minor_to_major); option 0 = -1.
    unary: [options] ns added by each option.
    default_perm: For "out": the layout the compiler picks for option 0.
  """
  config_slot: int
  slot: int
  perms: list
  unary: np.ndarray = None
  default_perm: tuple = None

  @property
  def num_options(self) -> int:
    return len(self.perms) + 1

  @functools.cached_property
  def feature_table(self) -> np.ndarray:
    """[options, 6] float32: the config feature values of each option."""
    table = -np.ones((self.num_options, 6), dtype=np.float32)
    for j, p in enumerate(self.perms, start=1):
      table[j, :len(p)] = p
    return table


@dataclasses.dataclass
class LayoutCostModel:
  """Runtime(config) = base + sum unary + sum pairwise, vectorised."""
  base: float
  variables: list
  pairs: dict  # (var_a, var_b) -> [options_a, options_b] ns

  def runtimes(self, choices: np.ndarray) -> np.ndarray:
    """Noiseless runtimes (ns) of configs given as [C, V] option indices."""
    total = np.full(choices.shape[0], self.base, dtype=np.float64)
    for v, var in enumerate(self.variables):
      total += var.unary[choices[:, v]]
    for (a, b), mat in self.pairs.items():
      total += mat[choices[:, a], choices[:, b]]
    return total

  def features(self, choices: np.ndarray, num_config_nodes: int) -> np.ndarray:
    """node_config_feat [C, nc, 18] of configs given as [C, V] options."""
    out = -np.ones((choices.shape[0], num_config_nodes, 18), dtype=np.float32)
    for v, var in enumerate(self.variables):
      s = var.slot * 6
      out[:, var.config_slot, s:s + 6] = var.feature_table[choices[:, v]]
    return out


def _perms(rank: int, rng: np.random.Generator) -> list:
  perms = list(itertools.permutations(range(rank)))
  if len(perms) > _MAX_PERMS:
    idx = rng.choice(len(perms), _MAX_PERMS, replace=False)
    perms = [perms[i] for i in sorted(idx)]
  return [tuple(p) for p in perms]


def _mem(inst: Instruction, perm, n_inputs: int, chip: hw.Chip) -> float:
  """Read inputs + write output, all at this layout's padded size."""
  return chip.transfer_ns(
      chip.padded_bytes(inst.dims, perm, inst.element_type) * (1 + n_inputs))


def _compute(inst: Instruction, insts: list, perm, chip: hw.Chip) -> float:
  """Matrix-unit time of a dot/convolution with output layout `perm`."""
  if inst.opcode not in ("dot", "convolution"):
    return 0.0
  out = np.prod(chip.padded_dims(inst.dims, perm), dtype=np.float64)
  lhs = insts[inst.operands[0]]
  if inst.opcode == "dot":
    depth = lhs.dims[-1]
  else:
    kern = insts[inst.operands[1]]
    depth = np.prod(kern.dims[:3], dtype=np.float64)
  return 2.0 * out * depth / chip.mxu_rate(inst.element_type)


def _transpose(inst: Instruction, chip: hw.Chip) -> float:
  """A copy that changes layout: the tensor crosses memory again."""
  return chip.op_overhead_ns + chip.transfer_ns(
      chip.copy_passes * chip.padded_bytes(
          inst.dims, default_layout(len(inst.dims)), inst.element_type))


def _read_penalty(consumer: Instruction, operand: Instruction, slot: int,
                  perm, insts: list, chip: hw.Chip) -> float:
  """Extra ns for `consumer` reading `operand` (slot 1 in, 2 kernel) in perm."""
  read = chip.transfer_ns(chip.padded_bytes(operand.dims, perm,
                                            operand.element_type))
  compute = _compute(consumer, insts, default_layout(len(consumer.dims)), chip)
  rank = len(operand.dims)
  if consumer.opcode == "dot":
    good = rank - 1 if slot == 1 else rank - 1  # contracting / output dim
    bad = chip.dot_bad_input if slot == 1 else chip.kernel_bad
  elif consumer.opcode == "convolution":
    good = 3 if slot == 1 else 3  # input feature / output feature dim
    bad = chip.conv_bad_input if slot == 1 else chip.kernel_bad
  else:
    return read
  return read + (0.0 if perm[0] == good else bad * compute)


def build(insts: list, config_ids: np.ndarray, rng: np.random.Generator,
          chip: hw.Chip = hw.DEFAULT) -> LayoutCostModel:
  """Builds the cost model of a program with the given configurable nodes.

  Args:
    insts: The program, topologically ordered.
    config_ids: Indices of its configurable nodes (node_config_ids).
    rng: Picks option subsets for ranks with more than 24 permutations.
    chip: Whose constants and propagation/copy rules price the program.

  Returns:
    The model; variables are ordered by (config slot, out/in/kernel).
  """
  n = len(insts)
  consumers = [[] for _ in range(n)]
  for u, inst in enumerate(insts):
    for pos, v in enumerate(inst.operands):
      consumers[v].append((u, pos))
  config_slot = {int(x): k for k, x in enumerate(config_ids)}

  # Regions: elementwise consumers (as first operand) inherit the layout.
  owner = np.full(n, -1, dtype=np.int64)
  for u in range(n):
    if u in config_slot:
      owner[u] = config_slot[u]
    elif insts[u].opcode in chip.propagates and insts[u].operands:
      first = insts[u].operands[0]
      if owner[first] >= 0 and insts[first].dims == insts[u].dims:
        owner[u] = owner[first]
  members = [[] for _ in config_ids]
  for u in range(n):
    if owner[u] >= 0:
      members[owner[u]].append(u)

  variables: list[Variable] = []
  out_var, in_var, kernel_var = {}, {}, {}
  for k, x in enumerate(config_ids):
    x = int(x)
    inst = insts[x]
    perms = _perms(len(inst.dims), rng)
    own = np.array([sum(_mem(insts[y], p, len(insts[y].operands), chip) +
                        _compute(insts[y], insts, p, chip)
                        for y in members[k])
                    for p in perms])
    # The compiler tunes dots and convolutions to their own region; it leaves
    # reshapes, transposes and copies in XLA's default layout.
    if inst.opcode in ("dot", "convolution") or default_layout(
        len(inst.dims)) not in perms:
      heuristic = perms[int(np.argmin(own))]
    else:
      heuristic = default_layout(len(inst.dims))
    out_var[k] = len(variables)
    variables.append(Variable(
        k, 0, perms, np.concatenate([[own[perms.index(heuristic)]], own]),
        default_perm=heuristic))
    for slot, table in ((1, in_var), (2, kernel_var)):
      pos = slot - 1
      if pos >= len(inst.operands) or (slot == 2 and inst.opcode not in (
          "dot", "convolution")):
        continue
      operand = insts[inst.operands[pos]]
      if len(operand.dims) < 2:
        continue
      table[k] = len(variables)
      variables.append(Variable(k, slot, _perms(len(operand.dims), rng)))

  pairs: dict = {}

  def add_pair(a, b, mat):
    key = (a, b)
    pairs[key] = pairs.get(key, 0.0) + mat

  def layouts_of(var_id):
    var = variables[var_id]
    return [var.default_perm] + var.perms

  base = 0.0
  for u, inst in enumerate(insts):
    if owner[u] < 0:
      perm = default_layout(len(inst.dims))
      base += chip.op_overhead_ns + max(
          _mem(inst, perm, len(inst.operands), chip),
          _compute(inst, insts, perm, chip))
    else:
      base += chip.op_overhead_ns

  # Reading choices (in / kernel): against the producer's layout.
  for k, x in enumerate(config_ids):
    inst = insts[int(x)]
    for slot, table in ((1, in_var), (2, kernel_var)):
      if k not in table:
        continue
      var = variables[table[k]]
      prod_id = inst.operands[slot - 1]
      operand = insts[prod_id]
      penalty = {}

      def read(p, inst=inst, operand=operand, slot=slot, penalty=penalty):
        if p not in penalty:
          penalty[p] = _read_penalty(inst, operand, slot, p, insts, chip)
        return penalty[p]

      def cost_given(src, var=var, operand=operand, read=read):
        src = tuple(src)
        return np.array([read(src)] + [
            (0.0 if p == src else _transpose(operand, chip)) + read(p)
            for p in var.perms])

      if owner[prod_id] < 0:
        var.unary = cost_given(default_layout(len(operand.dims)))
      else:
        src_var = out_var[int(owner[prod_id])]
        var.unary = np.zeros(var.num_options)
        add_pair(src_var, table[k], np.stack(
            [cost_given(p) for p in layouts_of(src_var)]))

  # Region boundaries: what consumers outside the region want.
  for k in range(len(config_ids)):
    ov = out_var[k]
    layouts = layouts_of(ov)
    for y in members[k]:
      for c, pos in consumers[y]:
        if owner[c] == k:
          continue
        cinst = insts[c]
        if c in config_slot and ((pos == 0 and config_slot[c] in in_var) or (
            pos == 1 and config_slot[c] in kernel_var)):
          continue  # Priced by the consumer's reading choice above.
        if cinst.opcode == "reduce" and pos == 0:
          pen = [chip.cross_lane * _mem(insts[y], p, 0, chip) if p[0] in
                 cinst.dimensions else 0.0 for p in layouts]
          variables[ov].unary = variables[ov].unary + np.array(pen)
        elif owner[c] >= 0 and cinst.opcode in chip.propagates:
          other = out_var[int(owner[c])]
          mat = np.array([[0.0 if p == q else _transpose(insts[y], chip)
                           for q in layouts_of(other)] for p in layouts])
          add_pair(ov, other, mat)
        else:
          want = default_layout(len(insts[y].dims))
          pen = [0.0 if tuple(p) == want else _transpose(insts[y], chip)
                 for p in layouts]
          variables[ov].unary = variables[ov].unary + np.array(pen)

  for var in variables:
    if var.unary is None:
      var.unary = np.zeros(var.num_options)
  return LayoutCostModel(base=base, variables=variables, pairs=pairs)


def pick_config_nodes(insts: list, rng: np.random.Generator,
                      max_nodes: int) -> np.ndarray:
  """Chooses the configurable nodes: layout-sensitive ops of rank >= 2."""
  cands = [u for u, i in enumerate(insts)
           if i.opcode in CONFIGURABLE and len(i.dims) >= 2]
  if len(cands) > max_nodes:
    cands = sorted(rng.choice(cands, max_nodes, replace=False).tolist())
  return np.array(cands, dtype=np.int64)
