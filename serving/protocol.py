"""TF Serving's predict request/response formats for tpurank models.

One place that knows the wire formats, used by the client and the local
server alike:

* REST `POST /v1/models/<name>[/versions/<v>]:predict` with the row format
  `{"instances": [{"b64": "<serialized tf.Example>"}, ...]}` (or the
  columnar `{"inputs": {"examples": [...]}}`); the answer is
  `{"predictions": [{"scores": [...], "config_index": [...]}, ...]}` (or
  `{"outputs": {...}}` for columnar requests).
* gRPC `tensorflow.serving.PredictionService/Predict` with a PredictRequest
  whose input `examples` is a DT_STRING tensor of serialized examples; the
  outputs `scores` (float) and `config_index` (int64) are [n, K_max].
* Model metadata: REST `GET /v1/models/<name>[/versions/<v>]/metadata`
  and gRPC `PredictionService/GetModelMetadata` (metadata_field
  "signature_def"), answered with the SavedModel's SignatureDefMap as TF
  Serving does.
* The `rank` signature (`signature_name: "rank"`): one graph's npz arrays
  as named inputs (REST `{"signature_name": "rank", "inputs": {"node_feat":
  [[...]], ...}}`, gRPC tensors), answered with `scores` [configs] (REST
  `{"outputs": {"scores": [...]}}`). No client-side preprocessing beyond
  the pruning the model was trained with.
"""

import base64
from typing import Optional

import numpy as np
import orjson
import tensorflow as tf
from google.protobuf import json_format
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import get_model_metadata_pb2
from tensorflow_serving.apis import predict_pb2

SIGNATURE = "serving_default"
INPUT = "examples"
OUTPUTS = ("scores", "config_index")
RANK_SIGNATURE = "rank"  # As `trainer.export.RANK_SIGNATURE`.
# `rank` with node_config_feat as int8 bytes (`trainer.export`).
RANK_PACKED_SIGNATURE = "rank_packed"
PACKED_CONFIG_INPUT = "node_config_bytes"
RANK_SIGNATURES = (RANK_SIGNATURE, RANK_PACKED_SIGNATURE)
# The `rank` inputs and their dtypes (`schemas.graph_tensor.ARRAY_SPECS`).
RANK_DTYPES = {"node_feat": np.float32, "node_opcode": np.int64,
               "edge_index": np.int64, "node_config_ids": np.int64,
               "node_config_feat": np.float32, "config_feat": np.float32}


class RequestError(ValueError):
  """A malformed request (the server answers 400 / INVALID_ARGUMENT)."""


def tf_error_line(error: Exception) -> str:
  """The one line of a TensorFlow error that says what was wrong (not the
  graph-execution preamble or the Python frames), at most 500 chars."""
  text = getattr(error, "message", None) or str(error)
  lines = [l.strip() for l in text.splitlines() if l.strip() and not (
      l.startswith((" ", "\t", "[[")) or
      l.startswith(("Graph execution error", "Detected at node")))]
  return (lines[-1] if lines else text.strip())[:500]


def to_json(body) -> bytes:
  """A REST body as JSON bytes. Numpy arrays serialize natively: one
  graph's config arrays are tens of MB of JSON, ~10x faster than `json`
  on `tolist()`. NaN and Inf become null (JSON has neither)."""
  return orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)


def from_json(raw: bytes):
  """A parsed REST body. Strict JSON: no NaN/Infinity literals; nesting
  deeper than 1024 is a ValueError like any malformed body."""
  return orjson.loads(raw)


def rest_request(serialized: list[bytes]) -> dict:
  """The REST predict body (row format) for serialized examples."""
  return {"signature_name": SIGNATURE,
          "instances": [{"b64": base64.b64encode(s).decode("ascii")}
                        for s in serialized]}


def _decode_b64(item, where: str,
                holding: str = "a serialized tf.Example") -> bytes:
  if isinstance(item, dict) and set(item) == {INPUT}:
    item = item[INPUT]  # {"examples": {"b64": ...}} in a named instance.
  if not (isinstance(item, dict) and isinstance(item.get("b64"), str)):
    raise RequestError(f"{where}: expected {{\"b64\": \"...\"}} holding "
                       f"{holding}")
  try:
    return base64.b64decode(item["b64"], validate=True)
  except ValueError as e:
    raise RequestError(f"{where}: invalid base64: {e}") from e


def parse_rest_request(body: dict) -> tuple[list[bytes], bool]:
  """Serialized examples of a REST body; and whether it was columnar."""
  if not isinstance(body, dict):
    raise RequestError("request body: expected a JSON object")
  sig = body.get("signature_name", SIGNATURE)
  if sig != SIGNATURE:
    raise RequestError(f"signature_name: expected {SIGNATURE!r}, found "
                       f"{sig!r}")
  if "instances" in body:
    items, columnar = body["instances"], False
  elif "inputs" in body:
    items, columnar = body["inputs"], True
    if isinstance(items, dict):
      if set(items) != {INPUT}:
        raise RequestError(f"inputs: expected the one input {INPUT!r}, "
                           f"found {sorted(items)}")
      items = items[INPUT]
  else:
    raise RequestError("request body: expected \"instances\" or \"inputs\"")
  if not isinstance(items, list) or not items:
    raise RequestError("instances: expected a non-empty list")
  return [_decode_b64(x, f"instances[{i}]") for i, x in enumerate(items)], \
      columnar


def rest_response(scores: np.ndarray, index: np.ndarray,
                  columnar: bool) -> dict:
  """The REST predict answer."""
  if columnar:
    return {"outputs": {"scores": scores.tolist(),
                        "config_index": index.tolist()}}
  return {"predictions": [{"scores": s.tolist(), "config_index": i.tolist()}
                          for s, i in zip(scores, index)]}


def parse_rest_response(body: dict) -> tuple[np.ndarray, np.ndarray]:
  """(scores, config_index) from a REST predict answer."""
  if "predictions" in body:
    rows = body["predictions"]
    return (np.array([r["scores"] for r in rows], np.float32),
            np.array([r["config_index"] for r in rows], np.int64))
  out = body["outputs"]
  return (np.array(out["scores"], np.float32),
          np.array(out["config_index"], np.int64))


def grpc_request(serialized: list[bytes], model: str,
                 version: Optional[int] = None) -> predict_pb2.PredictRequest:
  """The gRPC PredictRequest for serialized examples."""
  request = predict_pb2.PredictRequest()
  request.model_spec.name = model
  request.model_spec.signature_name = SIGNATURE
  if version is not None:
    request.model_spec.version.value = int(version)
  request.inputs[INPUT].CopyFrom(tf.make_tensor_proto(
      np.array(serialized, dtype=object), dtype=tf.string))
  return request


def parse_grpc_request(request: predict_pb2.PredictRequest) -> list[bytes]:
  """Serialized examples of a gRPC PredictRequest."""
  sig = request.model_spec.signature_name or SIGNATURE
  if sig != SIGNATURE:
    raise RequestError(f"signature_name: expected {SIGNATURE!r}, found "
                       f"{sig!r}")
  if set(request.inputs) != {INPUT}:
    raise RequestError(f"inputs: expected the one input {INPUT!r}, found "
                       f"{sorted(request.inputs)}")
  tensor = request.inputs[INPUT]
  if tensor.dtype != tf.string.as_datatype_enum:
    raise RequestError(f"inputs[{INPUT!r}]: expected DT_STRING")
  values = list(tensor.string_val)
  if not values:
    raise RequestError(f"inputs[{INPUT!r}]: expected at least one example")
  return values


def _grpc_outputs(signature: str, outputs: dict, model: str,
                  version: int) -> predict_pb2.PredictResponse:
  response = predict_pb2.PredictResponse()
  response.model_spec.name = model
  response.model_spec.signature_name = signature
  response.model_spec.version.value = int(version)
  for name, value in outputs.items():
    response.outputs[name].CopyFrom(tf.make_tensor_proto(value))
  return response


def grpc_response(scores: np.ndarray, index: np.ndarray, model: str,
                  version: int) -> predict_pb2.PredictResponse:
  return _grpc_outputs(SIGNATURE, {"scores": scores, "config_index": index},
                       model, version)


def parse_grpc_response(response: predict_pb2.PredictResponse
                        ) -> tuple[np.ndarray, np.ndarray]:
  return (tf.make_ndarray(response.outputs["scores"]),
          tf.make_ndarray(response.outputs["config_index"]))


def signature_of(body_or_request) -> str:
  """The signature a REST body (dict) or gRPC PredictRequest asks for."""
  if isinstance(body_or_request, dict):
    return body_or_request.get("signature_name") or SIGNATURE
  return body_or_request.model_spec.signature_name or SIGNATURE


def _rank_array(name: str, value) -> np.ndarray:
  if name not in RANK_DTYPES:
    raise RequestError(f"inputs: unknown input {name!r}; the rank signature "
                       f"takes {sorted(RANK_DTYPES)}")
  try:
    return np.asarray(value, dtype=RANK_DTYPES[name])
  except (TypeError, ValueError, OverflowError) as e:
    raise RequestError(f"inputs[{name!r}]: expected a numeric array ("
                       f"{np.dtype(RANK_DTYPES[name]).name}): {e}") from e


def pack_configs(arrays: dict) -> Optional[dict]:
  """The `rank_packed` inputs of a layout graph's `rank` arrays:
  node_config_feat as int8 bytes (C order). None for a tile graph, or if a
  value is not a small integer (then only `rank` can carry it)."""
  feat = arrays.get("node_config_feat")
  if feat is None:
    return None
  feat = np.asarray(feat)
  packed = feat.astype(np.int8)
  if not np.array_equal(packed, feat):
    return None
  out = {k: v for k, v in arrays.items() if k != "node_config_feat"}
  out[PACKED_CONFIG_INPUT] = np.ascontiguousarray(packed).tobytes()
  return out


def rank_signature_for(arrays: dict) -> str:
  """The signature that takes these inputs: `rank_packed` or `rank`."""
  return (RANK_PACKED_SIGNATURE if PACKED_CONFIG_INPUT in arrays
          else RANK_SIGNATURE)


def rest_rank_request(arrays: dict) -> dict:
  """The REST body (columnar) asking the `rank` signature of one graph, or
  `rank_packed` for arrays from `pack_configs`."""
  inputs = {}
  for k, v in arrays.items():
    inputs[k] = ({"b64": base64.b64encode(v).decode("ascii")}
                 if k == PACKED_CONFIG_INPUT else
                 np.ascontiguousarray(v, dtype=RANK_DTYPES.get(k)))
  return {"signature_name": rank_signature_for(arrays), "inputs": inputs}


def parse_rest_rank_request(body: dict) -> dict:
  """The named arrays of a REST `rank` or `rank_packed` body."""
  inputs = body.get("inputs")
  if not isinstance(inputs, dict) or not inputs:
    raise RequestError("inputs: expected an object of named arrays (the "
                       "rank signature takes the columnar format)")
  packed = signature_of(body) == RANK_PACKED_SIGNATURE
  return {k: (_decode_b64(v, f"inputs[{k!r}]", "the config values as "
                          "int8 bytes")
              if packed and k == PACKED_CONFIG_INPUT else _rank_array(k, v))
          for k, v in inputs.items()}


def rest_rank_response(scores: np.ndarray) -> dict:
  return {"outputs": {"scores": scores.tolist()}}


def parse_rest_rank_response(body: dict) -> np.ndarray:
  return np.array(body["outputs"]["scores"], np.float32)


def grpc_rank_request(arrays: dict, model: str,
                      version: Optional[int] = None
                      ) -> predict_pb2.PredictRequest:
  """The gRPC PredictRequest asking the `rank` signature of one graph, or
  `rank_packed` for arrays from `pack_configs`."""
  request = predict_pb2.PredictRequest()
  request.model_spec.name = model
  request.model_spec.signature_name = rank_signature_for(arrays)
  if version is not None:
    request.model_spec.version.value = int(version)
  for k, v in arrays.items():
    request.inputs[k].CopyFrom(tf.make_tensor_proto(
        v if k == PACKED_CONFIG_INPUT else np.asarray(v, RANK_DTYPES[k])))
  return request


def parse_grpc_rank_request(request: predict_pb2.PredictRequest) -> dict:
  """The named arrays of a gRPC `rank` or `rank_packed` request."""
  arrays = {}
  packed = signature_of(request) == RANK_PACKED_SIGNATURE
  for k, tensor in request.inputs.items():
    try:
      if packed and k == PACKED_CONFIG_INPUT:
        value = tf.make_ndarray(tensor)
        if value.shape or not isinstance(value.item(), bytes):
          raise RequestError(f"inputs[{k!r}]: expected a scalar string: the "
                             "config values as int8 bytes")
        arrays[k] = value.item()
        continue
      arrays[k] = _rank_array(k, tf.make_ndarray(tensor))
    except (TypeError, ValueError) as e:
      if isinstance(e, RequestError):
        raise
      raise RequestError(f"inputs[{k!r}]: not a valid tensor: {e}") from e
  if not arrays:
    raise RequestError("inputs: expected the graph's named arrays")
  return arrays


def grpc_rank_response(scores: np.ndarray, model: str, version: int,
                       signature: str = RANK_SIGNATURE
                       ) -> predict_pb2.PredictResponse:
  return _grpc_outputs(signature, {"scores": scores}, model, version)


def parse_grpc_rank_response(response: predict_pb2.PredictResponse
                             ) -> np.ndarray:
  return tf.make_ndarray(response.outputs["scores"])


METADATA_FIELD = "signature_def"  # The one field TF Serving's metadata has.


def signature_defs(model_dir: str) -> get_model_metadata_pb2.SignatureDefMap:
  """Every SignatureDef of a SavedModel's (first) MetaGraph, as TF Serving
  reports them."""
  saved = saved_model_pb2.SavedModel()
  with tf.io.gfile.GFile(f"{model_dir}/saved_model.pb", "rb") as f:
    saved.ParseFromString(f.read())
  out = get_model_metadata_pb2.SignatureDefMap()
  for name, sig in saved.meta_graphs[0].signature_def.items():
    out.signature_def[name].CopyFrom(sig)
  return out


def rest_metadata(name: str, version: int,
                  defs: get_model_metadata_pb2.SignatureDefMap) -> dict:
  """The REST answer of `GET .../metadata` (TF Serving's JSON: proto field
  names, default values printed, int64 as strings)."""
  return {"model_spec": {"name": name, "signature_name": "",
                         "version": str(version)},
          "metadata": {METADATA_FIELD: json_format.MessageToDict(
              defs, preserving_proto_field_name=True,
              including_default_value_fields=True)}}


def check_metadata_request(
    request: get_model_metadata_pb2.GetModelMetadataRequest) -> None:
  """Raises RequestError as TF Serving refuses a metadata request."""
  if not request.HasField("model_spec"):
    raise RequestError("Missing ModelSpec")
  if not request.metadata_field:
    raise RequestError(
        "GetModelMetadataRequest must specify at least one metadata_field")
  for field in request.metadata_field:
    if field != METADATA_FIELD:
      raise RequestError(f"Metadata field {field} is not supported")


def grpc_metadata_response(
    name: str, version: int, defs: get_model_metadata_pb2.SignatureDefMap
) -> get_model_metadata_pb2.GetModelMetadataResponse:
  response = get_model_metadata_pb2.GetModelMetadataResponse()
  response.model_spec.name = name
  response.model_spec.version.value = version
  response.metadata[METADATA_FIELD].Pack(defs)
  return response
