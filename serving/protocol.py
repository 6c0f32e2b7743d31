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
"""

import base64
from typing import Optional

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2

SIGNATURE = "serving_default"
INPUT = "examples"
OUTPUTS = ("scores", "config_index")


class RequestError(ValueError):
  """A malformed request (the server answers 400 / INVALID_ARGUMENT)."""


def rest_request(serialized: list[bytes]) -> dict:
  """The REST predict body (row format) for serialized examples."""
  return {"signature_name": SIGNATURE,
          "instances": [{"b64": base64.b64encode(s).decode("ascii")}
                        for s in serialized]}


def _decode_b64(item, where: str) -> bytes:
  if isinstance(item, dict) and set(item) == {INPUT}:
    item = item[INPUT]  # {"examples": {"b64": ...}} in a named instance.
  if not (isinstance(item, dict) and isinstance(item.get("b64"), str)):
    raise RequestError(f"{where}: expected {{\"b64\": \"...\"}} holding a "
                       "serialized tf.Example")
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


def grpc_response(scores: np.ndarray, index: np.ndarray, model: str,
                  version: int) -> predict_pb2.PredictResponse:
  response = predict_pb2.PredictResponse()
  response.model_spec.name = model
  response.model_spec.signature_name = SIGNATURE
  response.model_spec.version.value = int(version)
  response.outputs["scores"].CopyFrom(tf.make_tensor_proto(scores))
  response.outputs["config_index"].CopyFrom(tf.make_tensor_proto(index))
  return response


def parse_grpc_response(response: predict_pb2.PredictResponse
                        ) -> tuple[np.ndarray, np.ndarray]:
  return (tf.make_ndarray(response.outputs["scores"]),
          tf.make_ndarray(response.outputs["config_index"]))
