"""HLO opcode ids as TpuGraphs numbers them.

The ids are the dataset's own stable numbering (id 0 = unknown opcode), not
XLA's enum, so a model trained on TpuGraphs sees the same id for an opcode
whichever XLA version produced the graph. Ids 97 ("trace") and 101
("tuple-select") are opcodes removed from HLO; they keep their ids.
"""

OPCODE_IDS: dict[str, int] = {
  "abs": 1,
  "add": 2,
  "add-dependency": 3,
  "after-all": 4,
  "all-reduce": 5,
  "all-to-all": 6,
  "atan2": 7,
  "batch-norm-grad": 8,
  "batch-norm-inference": 9,
  "batch-norm-training": 10,
  "bitcast": 11,
  "bitcast-convert": 12,
  "broadcast": 13,
  "call": 14,
  "ceil": 15,
  "cholesky": 16,
  "clamp": 17,
  "collective-permute": 18,
  "count-leading-zeros": 19,
  "compare": 20,
  "complex": 21,
  "concatenate": 22,
  "conditional": 23,
  "constant": 24,
  "convert": 25,
  "convolution": 26,
  "copy": 27,
  "copy-done": 28,
  "copy-start": 29,
  "cosine": 30,
  "custom-call": 31,
  "divide": 32,
  "domain": 33,
  "dot": 34,
  "dynamic-slice": 35,
  "dynamic-update-slice": 36,
  "exponential": 37,
  "exponential-minus-one": 38,
  "fft": 39,
  "floor": 40,
  "fusion": 41,
  "gather": 42,
  "get-dimension-size": 43,
  "set-dimension-size": 44,
  "get-tuple-element": 45,
  "imag": 46,
  "infeed": 47,
  "iota": 48,
  "is-finite": 49,
  "log": 50,
  "log-plus-one": 51,
  "and": 52,
  "not": 53,
  "or": 54,
  "xor": 55,
  "map": 56,
  "maximum": 57,
  "minimum": 58,
  "multiply": 59,
  "negate": 60,
  "outfeed": 61,
  "pad": 62,
  "parameter": 63,
  "partition-id": 64,
  "popcnt": 65,
  "power": 66,
  "real": 67,
  "recv": 68,
  "recv-done": 69,
  "reduce": 70,
  "reduce-precision": 71,
  "reduce-window": 72,
  "remainder": 73,
  "replica-id": 74,
  "reshape": 75,
  "reverse": 76,
  "rng": 77,
  "rng-get-and-update-state": 78,
  "rng-bit-generator": 79,
  "round-nearest-afz": 80,
  "rsqrt": 81,
  "scatter": 82,
  "select": 83,
  "select-and-scatter": 84,
  "send": 85,
  "send-done": 86,
  "shift-left": 87,
  "shift-right-arithmetic": 88,
  "shift-right-logical": 89,
  "sign": 90,
  "sine": 91,
  "slice": 92,
  "sort": 93,
  "sqrt": 94,
  "subtract": 95,
  "tanh": 96,
  "trace": 97,
  "transpose": 98,
  "triangular-solve": 99,
  "tuple": 100,
  "tuple-select": 101,
  "while": 102,
  "cbrt": 103,
  "all-gather": 104,
  "collective-permute-start": 105,
  "collective-permute-done": 106,
  "logistic": 107,
  "dynamic-reshape": 108,
  "all-reduce-start": 109,
  "all-reduce-done": 110,
  "reduce-scatter": 111,
  "all-gather-start": 112,
  "all-gather-done": 113,
  "opt-barrier": 114,
  "async-start": 115,
  "async-update": 116,
  "async-done": 117,
  "round-nearest-even": 118,
  "stochastic-convert": 119,
  "tan": 120,
}

OPCODE_NAMES: dict[int, str] = {v: k for k, v in OPCODE_IDS.items()}

# HLO's elementwise ops with one operand, and all of them: XLA's layout
# assignment lets them run in their operand's layout, so a layout chosen
# upstream propagates through them. A compiler (or chip) may propagate
# through the one-operand ops only: the layout model weighs both rules
# (`trainer.learned_propagation`).
ELEMENTWISE_UNARY = frozenset((
    "abs", "cbrt", "ceil", "convert", "cosine", "exponential",
    "exponential-minus-one", "floor", "imag", "is-finite", "log",
    "log-plus-one", "logistic", "negate", "not", "popcnt", "real",
    "round-nearest-afz", "round-nearest-even", "rsqrt", "sign", "sine",
    "sqrt", "tan", "tanh"))
ELEMENTWISE = ELEMENTWISE_UNARY | frozenset((
    "add", "and", "atan2", "clamp", "compare", "divide", "maximum",
    "minimum", "multiply", "or", "power", "remainder", "select",
    "shift-left", "shift-right-arithmetic", "shift-right-logical",
    "subtract", "xor"))

UNKNOWN_OPCODE = 0
MAX_OPCODE_ID = max(OPCODE_IDS.values())
# Size of an embedding table that covers every id, unknown included.
NUM_OPCODE_IDS = MAX_OPCODE_ID + 1


def opcode_id(name: str) -> int:
  """Returns the TpuGraphs id of an HLO opcode name, 0 if it is unknown."""
  return OPCODE_IDS.get(name, UNKNOWN_OPCODE)


def opcode_name(op_id: int) -> str:
  """Returns the HLO opcode name of a TpuGraphs id, "unknown" if none."""
  return OPCODE_NAMES.get(int(op_id), "unknown")
