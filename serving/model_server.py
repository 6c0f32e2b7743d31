"""A local, TF Serving–compatible model server for tpurank SavedModels.

For machines without the `tensorflow_model_server` binary (it is neither on
PyPI nor in Debian). It serves every model of a repository
(`serving/model_repository.py` layout) with TF Serving's APIs:

* REST: `GET /v1/models/<name>[/versions/<v>]` (model status),
  `GET /v1/models/<name>[/versions/<v>]/metadata` (signatures) and
  `POST /v1/models/<name>[/versions/<v>]:predict`;
* gRPC: `tensorflow.serving.PredictionService/Predict` and
  `/GetModelMetadata`, and `tensorflow.serving.ModelService/GetModelStatus`,
  with the official protos of `tensorflow-serving-api`.

A poller loads a model's new highest version in the background and swaps it
in once loaded, so requests never wait for a load (no downtime); the old
version keeps answering until then. Bad requests get a 4xx with a JSON
`{"error": ...}` (gRPC: INVALID_ARGUMENT, NOT_FOUND, RESOURCE_EXHAUSTED),
never a crash.

Memory is bounded by admission control: at most `max_concurrent` requests
predict at once, each of at most `max_examples` examples, run through the
model in groups of at most `max_op_copies` op copies (`call_budget`), so a
request's peak memory does not grow with its size. A request that finds
no free slot within `queue_seconds` gets 429 / RESOURCE_EXHAUSTED (the
clients retry with back-off); one with too many examples gets 413.
"""

import concurrent.futures
import dataclasses
import http.server
import logging
import re
import threading
from typing import Callable, Optional

import grpc
import tensorflow as tf
from tensorflow_serving.apis import get_model_status_pb2
from tensorflow_serving.apis import model_service_pb2_grpc
from tensorflow_serving.apis import prediction_service_pb2_grpc

from schemas.errors import fail
from serving import call_budget
from serving import model_repository
from serving import options
from serving import protocol
from trainer import export
from trainer import hparams

_DRAIN_LIMIT = 1 << 30  # Larger oversized bodies are not even read.
# The server's own lines (loads, failed requests): shown to the user, apart
# from library logs (`tpurank.console`).
_log = logging.getLogger("tpurank.serve")
_ROUTE = re.compile(r"^/v1/models/(?P<name>[^/:]+)"
                    r"(?:/versions/(?P<version>\d+))?"
                    r"(?:(?P<verb>:predict)|(?P<metadata>/metadata))?$")


class NotFound(LookupError):
  """No such model or version (404 / NOT_FOUND)."""


class TooLarge(ValueError):
  """More examples than one prediction may hold (413 / RESOURCE_EXHAUSTED)."""


class Busy(RuntimeError):
  """No prediction slot freed up in time (429 / RESOURCE_EXHAUSTED)."""


@dataclasses.dataclass
class Loaded:
  """One loaded model version."""
  name: str
  version: int
  predict: Callable
  join: str = hparams.JOINS[0]  # The layout model's join: example costs.
  rank: Optional[Callable] = None  # The plain-tensor signature, if any.
  rank_packed: Optional[Callable] = None  # Its packed variant, if any.
  kind: Optional[str] = None  # "tile" or "layout", from its metadata.
  # Its SignatureDefMap (`protocol.signature_defs`), for metadata requests.
  signature_defs: Optional[object] = None


class ModelManager:
  """Keeps the newest version of every model under `base` loaded.

  Init args:
    base: The model repository.
    poll_seconds: How often to look for new versions.
  """

  def __init__(self, base: str, poll_seconds: float = 2.0):
    self.base, self._poll = base, poll_seconds
    self._models: dict[str, Loaded] = {}
    self._errors: dict[str, str] = {}
    self._lock = threading.Lock()
    self._stop = threading.Event()
    self._thread = None

  def refresh(self) -> None:
    """Loads any newer version; the current one serves meanwhile."""
    for name, versions in model_repository.models(self.base).items():
      newest = versions[-1]
      current = self._models.get(name)
      if current is not None and current.version >= newest:
        continue
      path = f"{self.base}/{name}/{newest}"
      try:
        signatures = tf.saved_model.load(path).signatures
        fn = signatures[protocol.SIGNATURE]
        defs = protocol.signature_defs(path)
      except Exception as e:  # pylint: disable=broad-except
        # A broken version must not take the server (or the old one) down.
        self._errors[name] = f"{path}: {e}"
        _log.error("could not load %s: %s", path, e)
        continue
      with self._lock:
        metadata = export.metadata_or_empty(path)
        self._models[name] = Loaded(
            name, newest, fn, export.model_join(metadata),
            signatures.get(protocol.RANK_SIGNATURE),
            signatures.get(protocol.RANK_PACKED_SIGNATURE),
            metadata.get("kind"), defs)
      _log.info("serving %s version %d", name, newest)

  def start(self) -> None:
    self.refresh()

    def loop():
      while not self._stop.wait(self._poll):
        try:
          self.refresh()
        except Exception as e:  # pylint: disable=broad-except
          _log.error("refresh failed: %s", e)

    self._thread = threading.Thread(target=loop, daemon=True)
    self._thread.start()

  def stop(self) -> None:
    self._stop.set()

  def get(self, name: str, version: Optional[int] = None) -> Loaded:
    with self._lock:
      loaded = self._models.get(name)
    if loaded is None:
      raise NotFound(f"Servable not found for request: Latest({name})")
    if version is not None and version != loaded.version:
      raise NotFound(f"Servable not found for request: "
                     f"Specific({name}, {version})")
    return loaded

  def served(self) -> dict[str, int]:
    with self._lock:
      return {n: m.version for n, m in self._models.items()}


def predict(loaded: Loaded, serialized: list[bytes]):
  """Runs the signature; malformed examples raise RequestError."""
  try:
    out = loaded.predict(examples=tf.constant(serialized, dtype=tf.string))
  except (tf.errors.InvalidArgumentError, ValueError) as e:
    raise protocol.RequestError(
        f"examples: could not be parsed as tpurank GraphTensor tf.Examples: "
        f"{protocol.tf_error_line(e)}") from e
  return out["scores"].numpy(), out["config_index"].numpy()


class Predictor:
  """Admission control in front of `predict`: bounds the memory in use.

  Init args:
    manager: Where the models come from.
    max_concurrent: Requests predicting at once.
    max_examples: Examples per request.
    queue_seconds: How long a request waits for a free slot.
    max_op_copies: Op copies per model call (requests are split into
      groups of examples within it).
  """

  def __init__(self, manager: ModelManager,
               max_concurrent: int = options.MAX_CONCURRENT,
               max_examples: int = options.MAX_EXAMPLES,
               queue_seconds: float = options.QUEUE_SECONDS,
               max_op_copies: int = options.MAX_OP_COPIES):
    if min(max_concurrent, max_examples, max_op_copies) < 1:
      raise ValueError("max_concurrent, max_examples and max_op_copies "
                       "must be >= 1")
    self.manager = manager
    self.slots = threading.BoundedSemaphore(max_concurrent)
    self._max_concurrent = max_concurrent
    self._max_examples, self._queue = max_examples, queue_seconds
    self._max_op_copies = max_op_copies
    self.calls = 0  # Model calls so far (requests may take several).

  def _acquire(self):
    if not self.slots.acquire(timeout=self._queue):
      raise Busy(f"server busy: {self._max_concurrent} requests predicting "
                 f"and no slot freed within {self._queue:g} s; retry later")

  def rank(self, name: str, version: Optional[int], arrays: dict):
    """(loaded, scores) of one graph's arrays through the `rank` signature,
    which bounds its memory itself (configs in chunks); raises NotFound,
    Busy or protocol.RequestError (wrong kind, missing or non-finite
    arrays)."""
    loaded = self.manager.get(name, version)
    signature = protocol.rank_signature_for(arrays)
    fn = (loaded.rank_packed if signature == protocol.RANK_PACKED_SIGNATURE
          else loaded.rank)
    if fn is None:
      raise protocol.RequestError(
          f"signature_name: model {name} version {loaded.version} has no "
          f"{signature!r} signature (exported before it existed, or a tile "
          f"model): send {protocol.RANK_SIGNATURE!r} or examples to "
          "serving_default")
    wanted = set(fn.structured_input_signature[1])
    if set(arrays) != wanted:
      raise protocol.RequestError(
          f"inputs: this {loaded.kind or ''} model's rank signature takes "
          f"{sorted(wanted)}, found {sorted(arrays)} (a graph of the "
          "other kind?)")
    self._acquire()
    try:
      self.calls += 1
      out = fn(**{k: tf.constant(v) for k, v in arrays.items()})
      return loaded, out["scores"].numpy()
    except (tf.errors.InvalidArgumentError, ValueError) as e:
      raise protocol.RequestError(
          f"inputs: {protocol.tf_error_line(e)}") from e
    finally:
      self.slots.release()

  def __call__(self, name: str, version: Optional[int],
               serialized: list[bytes]):
    """(loaded, scores, config_index); raises NotFound, TooLarge, Busy or
    protocol.RequestError."""
    loaded = self.manager.get(name, version)
    if len(serialized) > self._max_examples:
      raise TooLarge(f"request holds {len(serialized)} examples; the limit "
                     f"is {self._max_examples} per request: split it (e.g. "
                     f"`tpurank rank --batch {self._max_examples}`)")
    if not serialized:
      raise protocol.RequestError("examples: none given")
    self._acquire()

    def call(group):
      self.calls += 1
      return predict(loaded, group)

    try:
      scores, index = call_budget.score_in_groups(
          call, serialized, self._max_op_copies, loaded.join)
    except call_budget.NotAnExample as e:
      raise protocol.RequestError(f"examples: {e}") from e
    except call_budget.OverBudget as e:
      raise TooLarge(str(e)) from e
    finally:
      self.slots.release()
    return loaded, scores, index


def _status(loaded: Loaded) -> dict:
  return {"model_version_status": [{
      "version": str(loaded.version), "state": "AVAILABLE",
      "status": {"error_code": "OK", "error_message": ""}}]}


_REST_CODES = {NotFound: 404, TooLarge: 413, Busy: 429}
_GRPC_CODES = {NotFound: grpc.StatusCode.NOT_FOUND,
               TooLarge: grpc.StatusCode.RESOURCE_EXHAUSTED,
               Busy: grpc.StatusCode.RESOURCE_EXHAUSTED,
               protocol.RequestError: grpc.StatusCode.INVALID_ARGUMENT}


class _RestHandler(http.server.BaseHTTPRequestHandler):
  """TF Serving's REST API over the manager.

  One request is exactly the bytes its Content-Length says: a body framed
  otherwise (Transfer-Encoding) is refused and the connection closed after
  any framing error, so no body is ever read as the next request. Every
  answer is JSON, and a client fault logs one line, no traceback.
  """

  manager: ModelManager = None
  predictor: Predictor = None
  max_bytes: int = options.MAX_REQUEST_BYTES
  # The socket timeout of StreamRequestHandler: idle or slow clients.
  timeout = options.READ_TIMEOUT_SECONDS
  protocol_version = "HTTP/1.1"

  def log_message(self, fmt, *args):  # Requests are logged by `_send`.
    pass

  def send_error(self, code, message=None, explain=None):
    """The base class's errors (bad request line, 431, 501...) as JSON."""
    self.close_connection = True
    # An unparsable request line leaves HTTP/0.9, which has no status line
    # or headers: answer in HTTP/1.1 all the same.
    self.request_version = "HTTP/1.1"
    try:
      phrase = http.HTTPStatus(code).phrase
    except ValueError:
      phrase = "error"
    self._send(code, {"error": message or explain or phrase})

  def _send(self, code: int, body: dict):
    if code >= 400:
      # (A request line that did not parse has no command or path yet.)
      _log.warning("%s %s -> %d: %s", self.command or "-",
                      getattr(self, "path", "-"), code,
                      str(body.get("error", ""))[:200])
    data = protocol.to_json(body)
    self.send_response(code)
    if code == 429:
      self.send_header("Retry-After", "1")
    if self.close_connection:
      self.send_header("Connection", "close")
    self.send_header("Content-Type", "application/json")
    self.send_header("Content-Length", str(len(data)))
    self.end_headers()
    self.wfile.write(data)

  def _route(self):
    m = _ROUTE.match(self.path.split("?")[0])
    if not m:
      self._send(404, {"error": f"no such endpoint: {self.path}"})
      return None
    version = int(m["version"]) if m["version"] else None
    return m["name"], version, bool(m["verb"]), bool(m["metadata"])

  def do_GET(self):  # pylint: disable=invalid-name
    route = self._route()
    if route is None:
      return
    name, version, verb, metadata = route
    if verb:
      self._send(405, {"error": ":predict takes POST"})
      return
    try:
      loaded = self.manager.get(name, version)
      self._send(200, protocol.rest_metadata(
          loaded.name, loaded.version, loaded.signature_defs) if metadata
                 else _status(loaded))
    except NotFound as e:
      self._send(404, {"error": str(e)})

  def do_POST(self):  # pylint: disable=invalid-name
    route = self._route()
    if route is None:
      return
    name, version, verb, _ = route
    if not verb:
      self._send(405, {"error": "POST needs :predict"})
      return
    if self.headers.get("Transfer-Encoding") is not None:
      self.close_connection = True
      self._send(400 if self.headers.get("Content-Length") else 411,
                 {"error": "Transfer-Encoding is not supported: send the "
                           "body with a Content-Length"})
      return
    length = self.headers.get("Content-Length")
    if length is None or not length.isdigit():
      self.close_connection = True
      self._send(411, {"error": "Content-Length required"})
      return
    if int(length) > self.max_bytes:
      self.close_connection = True
      if int(length) <= _DRAIN_LIMIT:
        # Read and drop the body so the client can read the answer (an
        # unread body makes it fail with a broken pipe instead).
        left = int(length)
        while left > 0:
          left -= len(self.rfile.read(min(left, 1 << 20))) or left
      self._send(413, {"error": f"request of {length} bytes exceeds the "
                                f"limit of {self.max_bytes}"})
      return
    raw = self.rfile.read(int(length))
    if len(raw) < int(length):  # The client stopped sending (or timed out).
      self.close_connection = True
      self._send(400, {"error": f"body: expected {length} bytes, got "
                                f"{len(raw)}"})
      return
    try:
      body = protocol.from_json(raw)
      if (isinstance(body, dict) and
          protocol.signature_of(body) in protocol.RANK_SIGNATURES):
        _, scores = self.predictor.rank(
            name, version, protocol.parse_rest_rank_request(body))
        self._send(200, protocol.rest_rank_response(scores))
        return
      serialized, columnar = protocol.parse_rest_request(body)
      _, scores, index = self.predictor(name, version, serialized)
    except (NotFound, TooLarge, Busy) as e:
      self._send(_REST_CODES[type(e)], {"error": str(e)})
      return
    except (ValueError, RecursionError, protocol.RequestError) as e:
      # JSON errors too, and JSON nested too deep to parse.
      self._send(400, {"error": str(e)[:500] or type(e).__name__})
      return
    except Exception as e:  # pylint: disable=broad-except
      _log.exception("predict failed")
      self._send(500, {"error": f"internal error: {type(e).__name__}"})
      return
    self._send(200, protocol.rest_response(scores, index, columnar))


class _PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
  """gRPC PredictionService.Predict and GetModelMetadata over the manager."""

  def __init__(self, predictor: Predictor):
    self._predictor = predictor

  def Predict(self, request, context):  # pylint: disable=invalid-name
    version = (request.model_spec.version.value
               if request.model_spec.HasField("version") else None)
    try:
      signature = protocol.signature_of(request)
      if signature in protocol.RANK_SIGNATURES:
        loaded, scores = self._predictor.rank(
            request.model_spec.name, version,
            protocol.parse_grpc_rank_request(request))
        return protocol.grpc_rank_response(scores, loaded.name,
                                           loaded.version, signature)
      loaded, scores, index = self._predictor(
          request.model_spec.name, version,
          protocol.parse_grpc_request(request))
    except tuple(_GRPC_CODES) as e:
      context.abort(_GRPC_CODES[type(e)], str(e))
    return protocol.grpc_response(scores, index, loaded.name, loaded.version)

  def GetModelMetadata(self, request, context):  # pylint: disable=invalid-name
    version = (request.model_spec.version.value
               if request.model_spec.HasField("version") else None)
    try:
      protocol.check_metadata_request(request)
      loaded = self._predictor.manager.get(request.model_spec.name, version)
    except (NotFound, protocol.RequestError) as e:
      context.abort(_GRPC_CODES[type(e)], str(e))
    return protocol.grpc_metadata_response(loaded.name, loaded.version,
                                           loaded.signature_defs)


class _ModelService(model_service_pb2_grpc.ModelServiceServicer):
  """gRPC ModelService.GetModelStatus over the manager."""

  def __init__(self, manager: ModelManager):
    self._manager = manager

  def GetModelStatus(self, request, context):  # pylint: disable=invalid-name
    version = (request.model_spec.version.value
               if request.model_spec.HasField("version") else None)
    try:
      loaded = self._manager.get(request.model_spec.name, version)
    except NotFound as e:
      context.abort(grpc.StatusCode.NOT_FOUND, str(e))
    response = get_model_status_pb2.GetModelStatusResponse()
    status = response.model_version_status.add()
    status.version = loaded.version
    status.state = get_model_status_pb2.ModelVersionStatus.AVAILABLE
    return response


class _BoundedHTTPServer(http.server.ThreadingHTTPServer):
  """A thread per connection, at most `max_connections` at once: beyond
  that a connection gets 503 (JSON) and is closed at once."""

  daemon_threads = True

  def __init__(self, address, handler, max_connections: int):
    super().__init__(address, handler)
    self._slots = threading.BoundedSemaphore(max_connections)

  def process_request(self, request, client_address):
    if not self._slots.acquire(blocking=False):
      body = protocol.to_json(
          {"error": "too many connections; retry later"}).decode()
      try:
        request.sendall((
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: "
            "application/json\r\nConnection: close\r\nRetry-After: 1\r\n"
            f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
      except OSError:
        pass
      self.shutdown_request(request)
      return
    super().process_request(request, client_address)

  def process_request_thread(self, request, client_address):
    try:
      super().process_request_thread(request, client_address)
    finally:
      self._slots.release()

  def handle_error(self, request, client_address):
    # A connection dropped or reset by its client: one line, no traceback.
    _log.info("connection from %s ended with an error", client_address)


class ModelServer:
  """REST and gRPC endpoints over one model repository.

  Init args:
    base: The model repository (`<base>/<name>/<version>/`).
    host: Interface to bind ("127.0.0.1": this machine only).
    rest_port: REST port (0: any free port).
    grpc_port: gRPC port (0: any free port; None: no gRPC).
    poll_seconds: How often to look for new versions.
    max_request_bytes: Larger requests are refused (413 /
      RESOURCE_EXHAUSTED).
    max_concurrent: Predictions running at once (bounds memory).
    max_examples: Examples per request (413 / RESOURCE_EXHAUSTED beyond).
    queue_seconds: How long a request waits for a prediction slot before
      429 / RESOURCE_EXHAUSTED.
    max_op_copies: Op copies per model call (bounds a request's memory).
    read_timeout: Seconds a REST connection may stay idle or take to send
      its request before it is closed.
    max_connections: Open REST connections at once (more get 503).
  """

  def __init__(self, base: str, host: str = options.HOST,
               rest_port: int = options.REST_PORT,
               grpc_port: Optional[int] = options.GRPC_PORT,
               poll_seconds: float = options.POLL_SECONDS,
               max_request_bytes: int = options.MAX_REQUEST_BYTES,
               max_concurrent: int = options.MAX_CONCURRENT,
               max_examples: int = options.MAX_EXAMPLES,
               queue_seconds: float = options.QUEUE_SECONDS,
               max_op_copies: int = options.MAX_OP_COPIES,
               read_timeout: float = options.READ_TIMEOUT_SECONDS,
               max_connections: int = options.MAX_CONNECTIONS):
    self.manager = ModelManager(base, poll_seconds)
    self._read_timeout, self._max_connections = read_timeout, max_connections
    self.predictor = Predictor(self.manager, max_concurrent, max_examples,
                               queue_seconds, max_op_copies)
    self._host, self._rest_port, self._grpc_port = host, rest_port, grpc_port
    self._max = max_request_bytes
    self._http = self._grpc = None
    self.rest_port = self.grpc_port = None

  def start(self) -> "ModelServer":
    """Loads the models and starts serving; returns self (ports are set)."""
    self.manager.start()
    if not self.manager.served():
      raise fail(
          self.manager.base, "model base", "at least one loadable "
          "<name>/<version>/saved_model.pb", "none")
    handler = type("Handler", (_RestHandler,), {
        "manager": self.manager, "predictor": self.predictor,
        "max_bytes": self._max, "timeout": self._read_timeout})
    self._http = _BoundedHTTPServer((self._host, self._rest_port), handler,
                                    self._max_connections)
    self.rest_port = self._http.server_address[1]
    threading.Thread(target=self._http.serve_forever, daemon=True).start()
    if self._grpc_port is not None:
      self._grpc = grpc.server(
          concurrent.futures.ThreadPoolExecutor(max_workers=16),
          options=[("grpc.max_receive_message_length", self._max),
                   ("grpc.max_send_message_length", self._max)])
      prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
          _PredictionService(self.predictor), self._grpc)
      model_service_pb2_grpc.add_ModelServiceServicer_to_server(
          _ModelService(self.manager), self._grpc)
      self.grpc_port = self._grpc.add_insecure_port(
          f"{self._host}:{self._grpc_port}")
      self._grpc.start()
    return self

  def stop(self) -> None:
    self.manager.stop()
    if self._http:
      self._http.shutdown()
      self._http.server_close()
    if self._grpc:
      self._grpc.stop(grace=1)

  def __enter__(self):
    return self.start()

  def __exit__(self, *exc):
    self.stop()
