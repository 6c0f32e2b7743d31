"""Clients of a TF Serving–compatible server (real TF Serving or `tpurank
serve`): REST and gRPC, with the same `score_examples` as the in-process
scorer, so `saved_model_scorer.score_graph` ranks any number of configs in
chunked requests through either.
"""

import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Optional

import grpc
import numpy as np
from tensorflow_serving.apis import prediction_service_pb2_grpc

from conversion import options as conversion_options
from schemas.errors import fail
from serving import options
from serving import protocol
from trainer import call_cost
from trainer import hparams

DEFAULT_MODEL = options.MODEL_NAME
MAX_MESSAGE_BYTES = 256 << 20
RETRIES = 6  # On "busy" answers, after 0.5, 1, 2, 4, 8, 16 s.


class ServerError(RuntimeError):
  """The server answered with an error (status and its message)."""


class ServerBusy(ServerError):
  """The server is at capacity (REST 429; gRPC RESOURCE_EXHAUSTED busy)."""


def _with_retries(call, retries: int):
  """call(); on ServerBusy waits with exponential back-off, `retries` times."""
  for attempt in range(retries + 1):
    try:
      return call()
    except ServerBusy:
      if attempt == retries:
        raise
      time.sleep(0.5 * 2**attempt)


# Bytes of JSON a config value takes: as text (`rank`, "-1.0,") and as
# base64 of an int8 (`rank_packed`).
JSON_VALUE_BYTES = 6
PACKED_VALUE_BYTES = 4 / 3


def packed_or_plain(client, send, arrays: dict) -> dict:
  """send(inputs) as `rank_packed` where the arrays pack
  (`protocol.pack_configs`); a model without that signature (exported
  before it) gets `rank`, and the client remembers. As text the configs
  are ~4x larger: they go in as many requests as the size limit needs."""
  packed = protocol.pack_configs(arrays) if client.packed else None
  if packed is not None:
    try:
      return send(packed)
    except ServerError as e:
      if protocol.RANK_PACKED_SIGNATURE not in str(e):
        raise
      client.packed = False
  feat = arrays.get("node_config_feat")
  if feat is None or not len(feat):
    return send(arrays)
  step = max(1, options.MAX_REQUEST_BYTES // 2 // int(
      JSON_VALUE_BYTES * np.asarray(feat[0]).size))
  return {"scores": np.concatenate([
      send(dict(arrays, node_config_feat=feat[i:i + step]))["scores"]
      for i in range(0, len(feat), step)])}


class RestClient:
  """Predicts through TF Serving's REST API.

  Init args:
    url: e.g. "http://localhost:8501".
    model: Model name.
    version: A version number, or None for the one the server serves.
    timeout: Seconds per request.
    retries: Retries with back-off while the server answers 429 (busy).
  """

  def __init__(self, url: str, model: str = DEFAULT_MODEL,
               version: Optional[int] = None, timeout: float = 120.0,
               retries: int = RETRIES):
    self._base = url.rstrip("/")
    path = f"/v1/models/{model}"
    if version is not None:
      path += f"/versions/{int(version)}"
    self._path, self._timeout, self._retries = path, timeout, retries
    self.packed = True  # Until the model turns out to lack `rank_packed`.

  def _call(self, path: str, body: Optional[dict] = None) -> dict:
    data = None if body is None else protocol.to_json(body)
    request = urllib.request.Request(
        self._base + path, data=data,
        headers={"Content-Type": "application/json"})
    try:
      with urllib.request.urlopen(request, timeout=self._timeout) as r:
        return protocol.from_json(r.read())
    except urllib.error.HTTPError as e:
      try:
        message = protocol.from_json(e.read()).get("error", "")
      except ValueError:
        message = e.reason
      error = ServerBusy if e.code == 429 else ServerError
      raise error(f"{self._base}{path}: HTTP {e.code}: {message}") from e
    except urllib.error.URLError as e:
      raise fail(self._base, "--server", "a reachable TF Serving REST "
                 "endpoint (is `tpurank serve` running?)",
                 str(e.reason)) from e

  def status(self) -> dict:
    """The model status (`GET /v1/models/<name>`)."""
    return self._call(self._path)

  def score_examples(self, serialized: list[bytes]):
    """(scores [n, K_max] lower = faster, config_index [n, K_max])."""
    body = protocol.rest_request(serialized)
    return protocol.parse_rest_response(_with_retries(
        lambda: self._call(self._path + ":predict", body), self._retries))

  def rank(self, **arrays) -> dict:
    """{"scores": [configs]} of one graph's npz arrays (`rank_packed` or
    `rank` signature, see `packed_or_plain`)."""

    def send(inputs):
      body = protocol.rest_rank_request(inputs)
      return {"scores": protocol.parse_rest_rank_response(_with_retries(
          lambda: self._call(self._path + ":predict", body), self._retries))}
    return packed_or_plain(self, send, arrays)


class GrpcClient:
  """Predicts through TF Serving's gRPC PredictionService.

  Init args:
    target: "host:port".
    model: Model name.
    version: A version number, or None for the one the server serves.
    timeout: Seconds per request.
    retries: Retries with back-off while the server answers busy.
  """

  def __init__(self, target: str, model: str = DEFAULT_MODEL,
               version: Optional[int] = None, timeout: float = 120.0,
               retries: int = RETRIES):
    self._target, self._model, self._version = target, model, version
    self._timeout, self._retries = timeout, retries
    self.packed = True  # Until the model turns out to lack `rank_packed`.
    self._channel = grpc.insecure_channel(target, options=[
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)])
    self._stub = prediction_service_pb2_grpc.PredictionServiceStub(
        self._channel)

  def score_examples(self, serialized: list[bytes]):
    """(scores [n, K_max] lower = faster, config_index [n, K_max])."""
    request = protocol.grpc_request(serialized, self._model, self._version)
    return protocol.parse_grpc_response(
        _with_retries(lambda: self._predict(request), self._retries))

  def rank(self, **arrays) -> dict:
    """{"scores": [configs]} of one graph's npz arrays (`rank_packed` or
    `rank` signature, see `packed_or_plain`)."""

    def send(inputs):
      request = protocol.grpc_rank_request(inputs, self._model,
                                           self._version)
      return {"scores": protocol.parse_grpc_rank_response(
          _with_retries(lambda: self._predict(request), self._retries))}
    return packed_or_plain(self, send, arrays)

  def _predict(self, request):
    try:
      return self._stub.Predict(request, timeout=self._timeout)
    except grpc.RpcError as e:
      if e.code() == grpc.StatusCode.UNAVAILABLE:
        raise fail(self._target, "--server", "a reachable TF Serving gRPC "
                   "endpoint (is `tpurank serve` running?)",
                   e.details()) from e
      busy = (e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and
              (e.details() or "").startswith("server busy"))
      raise (ServerBusy if busy else ServerError)(
          f"{self._target}: {e.code().name}: {e.details()}") from e

  def close(self):
    self._channel.close()


def configs_per_request(graph) -> int:
  """Configs per `rank` request of a (pruned) graph: what the call budget
  allows (the late join's), and what fits in half the server's request
  size limit as JSON (layout: `rank_packed`'s base64; tile: as text) beside
  the graph's own arrays (as text)."""
  per_config = (PACKED_VALUE_BYTES * 18 * max(len(graph.node_config_ids), 1)
                if graph.kind == "layout" else JSON_VALUE_BYTES * 24)
  graph_bytes = JSON_VALUE_BYTES * (graph.node_feat.size + graph.num_nodes +
                                    graph.edge_index.size)
  join = hparams.JOINS[0]  # The default model's; the signature chunks.
  most = min(conversion_options.RANK_K[join], int(
      (options.MAX_REQUEST_BYTES // 2 - graph_bytes) // per_config))
  if graph.kind != "layout":
    return max(1, most)
  return int(call_cost.configs_per_example(
      graph.num_nodes, len(graph.node_config_ids), join, most=max(most, 1)))


def connect(server: str, model: str = DEFAULT_MODEL,
            version: Optional[int] = None):
  """A client for `http(s)://host:port` (REST) or `grpc://host:port`."""
  parsed = urllib.parse.urlparse(server)
  if parsed.scheme in ("http", "https"):
    return RestClient(server, model, version)
  if parsed.scheme == "grpc" and parsed.netloc:
    return GrpcClient(parsed.netloc, model, version)
  raise fail(server, "--server", "http://HOST:PORT (REST) or "
             "grpc://HOST:PORT (gRPC)", repr(server))

