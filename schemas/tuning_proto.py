"""The raw TpuGraphs tuning protos, read with descriptors built here.

`TuningData` (tile: one ModuleTuningData per kernel) and `ModuleTuningData`
(layout: one whole program) are defined by their wire format (field numbers
and types, see ../shared/data/real_tpu/README.md); the XLA messages they
embed (`xla.HloModuleProto`, `xla.ExecutionProfile`) come from TensorFlow's
own compiled protos. Nothing needs protoc at run time.
"""

import functools

from google.protobuf import descriptor_pb2
from google.protobuf import descriptor_pool
from google.protobuf import message_factory
from google.protobuf.message import DecodeError
# Registers xla/service/hlo.proto and xla/xla_data.proto in the default pool.
from tensorflow.compiler.xla import xla_data_pb2  # pylint: disable=unused-import
from tensorflow.compiler.xla.service import hlo_pb2  # pylint: disable=unused-import

from schemas import npz_io
from schemas.errors import fail

_PACKAGE = "tpurank.tuning"
_T = descriptor_pb2.FieldDescriptorProto
_OPT, _REP = _T.LABEL_OPTIONAL, _T.LABEL_REPEATED

# message -> [(field, number, type, label, message type name or None)]
_MESSAGES = {
    "TensorLayoutConfig": [("dims", 1, _T.TYPE_INT32, _REP, None)],
    "NodeLayoutConfig": [("tensors", 1, _T.TYPE_MESSAGE, _REP,
                          "TensorLayoutConfig")],
    "LayoutConfig": [("nodes", 1, _T.TYPE_MESSAGE, _REP, "NodeLayoutConfig")],
    "HloModuleConfig": [("layout_config", 1, _T.TYPE_MESSAGE, _OPT,
                         "LayoutConfig")],
    "TileSizeConfig": [("kernel_bounds", 1, _T.TYPE_INT64, _REP, None),
                       ("output_bounds", 2, _T.TYPE_INT64, _REP, None),
                       ("input_bounds", 3, _T.TYPE_INT64, _REP, None),
                       ("iteration_bounds", 4, _T.TYPE_INT64, _REP, None)],
    "HloOpConfig": [("tile_size_config", 1, _T.TYPE_MESSAGE, _OPT,
                     "TileSizeConfig")],
    "ConfigProfile": [("op_config", 1, _T.TYPE_MESSAGE, _OPT, "HloOpConfig"),
                      ("module_config", 2, _T.TYPE_MESSAGE, _OPT,
                       "HloModuleConfig"),
                      ("error", 3, _T.TYPE_BOOL, _OPT, None),
                      ("profile", 4, _T.TYPE_MESSAGE, _OPT,
                       ".xla.ExecutionProfile"),
                      ("is_default", 5, _T.TYPE_BOOL, _OPT, None)],
    "ModuleTuningData": [("module", 1, _T.TYPE_MESSAGE, _OPT,
                          ".xla.HloModuleProto"),
                         ("fingerprint", 2, _T.TYPE_UINT64, _OPT, None),
                         ("runs", 3, _T.TYPE_MESSAGE, _REP, "ConfigProfile"),
                         ("config_index_to_node", 4, _T.TYPE_UINT64, _REP,
                          None)],
    "TuningData": [("modules", 1, _T.TYPE_MESSAGE, _REP, "ModuleTuningData")],
}


@functools.lru_cache(maxsize=None)
def _classes() -> dict:
  pool = descriptor_pool.Default()
  file = descriptor_pb2.FileDescriptorProto(
      name="tpurank/tuning.proto", package=_PACKAGE, syntax="proto3",
      dependency=["xla/service/hlo.proto", "xla/xla_data.proto"])
  for name, fields in _MESSAGES.items():
    msg = file.message_type.add(name=name)
    for fname, number, ftype, label, type_name in fields:
      f = msg.field.add(name=fname, number=number, type=ftype, label=label)
      if type_name:
        f.type_name = (type_name if type_name.startswith(".") else
                       f".{_PACKAGE}.{type_name}")
  try:
    pool.Add(file)
  except TypeError:
    pass  # Already added (e.g. a second import under another name).
  factory = message_factory.MessageFactory(pool)
  return {n: factory.GetPrototype(pool.FindMessageTypeByName(
      f"{_PACKAGE}.{n}")) for n in _MESSAGES}


def message_class(name: str):
  """The generated class of one tuning message, e.g. "TuningData"."""
  return _classes()[name]


TILE, LAYOUT = "tile", "layout"


def _varint(data: bytes, pos: int) -> tuple[int, int]:
  value, shift = 0, 0
  while True:
    if pos >= len(data):
      raise DecodeError("truncated varint")
    b = data[pos]
    value |= (b & 0x7F) << shift
    pos += 1
    if not b & 0x80:
      return value, pos
    shift += 7


def top_level_fields(data: bytes) -> set[int]:
  """Field numbers present at the top level of a serialized message."""
  fields, pos = set(), 0
  while pos < len(data):
    tag, pos = _varint(data, pos)
    number, wire = tag >> 3, tag & 7
    if wire == 0:
      _, pos = _varint(data, pos)
    elif wire == 1:
      pos += 8
    elif wire == 2:
      size, pos = _varint(data, pos)
      pos += size
    elif wire == 5:
      pos += 4
    else:
      raise DecodeError(f"unsupported wire type {wire}")
    if pos > len(data) or number == 0:
      raise DecodeError("truncated or invalid message")
    fields.add(number)
  return fields


def read(path: str):
  """Reads a raw tuning file.

  ModuleTuningData (a whole program with layout runs) carries runs (field 3)
  at its top level; TuningData (kernels with tile runs) only repeats
  field 1. That tells them apart without trial parsing.

  Returns:
    ("layout", ModuleTuningData) or ("tile", TuningData).

  Raises:
    InputError: unreadable, not a tuning proto, or without runs.
  """
  try:
    npz_io.check_regular_file(path)  # A FIFO would block, a device never end.
    with open(path, "rb") as f:
      data = f.read()
  except (OSError, ValueError) as e:
    raise fail(path, "file", "a readable regular file", str(e)) from e
  try:
    fields = top_level_fields(data)
    if fields <= {1} and fields:
      kind, msg = TILE, message_class("TuningData").FromString(data)
      ok = msg.modules and all(m.module.computations and m.runs
                               for m in msg.modules)
    else:
      kind, msg = LAYOUT, message_class("ModuleTuningData").FromString(data)
      ok = msg.module.computations and msg.runs
  except DecodeError as e:
    raise fail(path, "file", "a binary TuningData or ModuleTuningData proto",
               f"undecodable bytes ({e})") from e
  if not ok:
    raise fail(path, "runs", "a module with HLO computations and tuning "
               "runs", "none")
  return kind, msg
