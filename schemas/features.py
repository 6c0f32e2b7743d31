"""Feature layouts of TpuGraphs: the 140 node features and the config features.

Index numbers follow the "Features" section of the official TpuGraphs README.
Sequences of numbers (shapes, windows, ...) are stored as their first k values
(zero-padded), then their sum, then their product.
"""

NODE_FEATURES = 140
TILE_CONFIG_FEATURES = 24
LAYOUT_CONFIG_FEATURES = 18
MAX_RANK = 6  # No TpuGraphs tensor has more than six dimensions.
# TPU memory tiling: the most-minor dim of a layout pads to a multiple of
# the lane count, the second-minor to the sublane count.
TPU_LANES, TPU_SUBLANES = 128, 8
# The tilings a layout model weighs (it learns which one the data's chip
# uses): real TPUs tile the second-minor dim by 8, 16 or 32 (32-, 16-, 8-bit
# types) and the minor by 128 lanes; 256 is a 256-wide matrix unit's.
TILE_LANE_CHOICES = (128, 256)
TILE_SUBLANE_CHOICES = (8, 16, 32)

# Node feature indices (start of each group).
IS_ROOT = 0
ELEMENT_SIZE_IN_BITS = 1  # Deprecated upstream: always 0.
ELEMENT_TYPE = 2  # 2..20: one-hot over ELEMENT_TYPES.
SHAPE_DIMS = 21  # 21..26 dims, 27 sum, 28 product.
TUPLE_SHAPES_SIZE = 29
PARAMETER_NUMBER = 30
DIMENSIONS = 31  # 31..36: the op's `dimensions` attribute.
WINDOW_SIZE = 37  # Each window group: 6 values, sum, product.
WINDOW_STRIDE = 45
WINDOW_PADDING_LOW = 53
WINDOW_PADDING_HIGH = 61
WINDOW_DILATION = 69
WINDOW_BASE_DILATION = 77
WINDOW_REVERSAL = 85  # 85..90 flags, 91 true count, 92 false count.
CONV_INPUT_BATCH_DIM = 93
CONV_INPUT_FEATURE_DIM = 94
CONV_INPUT_SPATIAL_DIMS = 95  # 95..98
CONV_KERNEL_INPUT_FEATURE_DIM = 99
CONV_KERNEL_OUTPUT_FEATURE_DIM = 100
CONV_KERNEL_SPATIAL_DIMS = 101  # 101..104
CONV_OUTPUT_BATCH_DIM = 105
CONV_OUTPUT_FEATURE_DIM = 106
FEATURE_GROUP_COUNT = 107
BATCH_GROUP_COUNT = 108
SLICE_START = 109  # Slice groups: 2 values, sum, product.
SLICE_STRIDE = 113
SLICE_LIMIT = 117
DYNAMIC_SLICE_SIZES = 121
PADDING_LOW = 125
PADDING_HIGH = 129
IS_STABLE = 133
LAYOUT_MINOR_TO_MAJOR = 134  # 134..139

# Element types in one-hot order (XLA PrimitiveType names, lower case).
ELEMENT_TYPES = (
    "invalid", "pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64",
    "f16", "f32", "f64", "bf16", "c64", "c128", "tuple", "opaque", "token")
ELEMENT_BITS = {
    "pred": 8, "s8": 8, "s16": 16, "s32": 32, "s64": 64, "u8": 8, "u16": 16,
    "u32": 32, "u64": 64, "f16": 16, "f32": 32, "f64": 64, "bf16": 16,
    "c64": 64, "c128": 128}

# Tile config feature groups: 6 values, sum, product each.
TILE_KERNEL_BOUNDS = 0
TILE_OUTPUT_BOUNDS = 8
TILE_INPUT_BOUNDS = 16

# Layout config feature groups: 6 minor-to-major dims each, -1 padded; a
# group of all -1 asks the compiler for its default layout.
LAYOUT_OUTPUT = 0
LAYOUT_INPUT = 6
LAYOUT_KERNEL = 12


def sequence_feature(values, k: int,
                     zero_product_on_empty: bool = False) -> list[float]:
  """Encodes a sequence as TpuGraphs does: k leading values, sum, product.

  Args:
    values: Any iterable of numbers.
    k: How many leading values to keep (zero-padded).
    zero_product_on_empty: Upstream encodes the product of an empty sequence
      as 0 for tile config bounds and as 1 everywhere else.

  Returns:
    k + 2 floats.
  """
  values = [int(v) for v in values]
  head = values[:k] + [0] * (k - min(k, len(values)))
  product = 1
  for v in values:
    product *= v
  if not values and zero_product_on_empty:
    product = 0
  return [float(v) for v in head] + [float(sum(values)), float(product)]


def layout_feature(minor_to_major) -> list[float]:
  """Encodes a layout (or None = compiler default) as 6 values, -1 padded."""
  if minor_to_major is None:
    return [-1.0] * MAX_RANK
  dims = [float(d) for d in minor_to_major]
  return dims + [-1.0] * (MAX_RANK - len(dims))
