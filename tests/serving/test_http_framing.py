"""The local REST server under hostile framing: one request per body, JSON
errors for every status, bounded connections (raw sockets, localhost)."""

import json
import socket
import time

import pytest

from serving import model_server


@pytest.fixture
def server(repository):
  base, _ = repository
  srv = model_server.ModelServer(base, rest_port=0, grpc_port=None,
                                 read_timeout=1.0, max_connections=2).start()
  yield srv
  srv.stop()


def _connect(srv) -> socket.socket:
  s = socket.create_connection(("127.0.0.1", srv.rest_port), timeout=10)
  return s


def _read_all(s: socket.socket) -> bytes:
  """Everything until the server closes the connection."""
  chunks = []
  while True:
    data = s.recv(65536)
    if not data:
      return b"".join(chunks)
    chunks.append(data)


def _responses(raw: bytes) -> list[tuple[int, dict]]:
  """(status, JSON body) of each HTTP response in `raw`."""
  out = []
  while raw:
    head, _, rest = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(l.split(": ", 1) for l in lines[1:])
    n = int(headers["Content-Length"])
    assert headers["Content-Type"] == "application/json"
    out.append((int(lines[0].split()[1]), json.loads(rest[:n])))
    raw = rest[n:]
  return out


SMUGGLED = (b"GET /v1/models/tpurank HTTP/1.1\r\nHost: x\r\n\r\n")


@pytest.mark.parametrize("headers,code", [
    (b"Transfer-Encoding: chunked\r\n", 411),
    (b"Transfer-Encoding: chunked\r\nContent-Length: 4\r\n", 400),
])
def test_a_body_framed_otherwise_is_refused_and_never_read_as_a_request(
    server, headers, code):
  body = b"%x\r\n" % len(SMUGGLED) + SMUGGLED + b"\r\n0\r\n\r\n"
  s = _connect(server)
  s.sendall(b"POST /v1/models/tpurank:predict HTTP/1.1\r\nHost: x\r\n" +
            headers + b"\r\n" + body)
  got = _responses(_read_all(s))
  # One answer: the smuggled GET inside the body was not served.
  assert [c for c, _ in got] == [code]
  assert "Transfer-Encoding" in got[0][1]["error"]


@pytest.mark.parametrize("request_bytes,code", [
    (b"PUT /v1/models/tpurank HTTP/1.1\r\nHost: x\r\n\r\n", 501),
    (b"GARBAGE\r\n\r\n", 400),
    (b"GET /v1/models/tpurank HTTP/1.1\r\n" + b"X: y\r\n" * 200 + b"\r\n",
     431),
    (b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n", 404),
])
def test_every_error_is_json(server, request_bytes, code):
  s = _connect(server)
  s.sendall(request_bytes)
  s.shutdown(socket.SHUT_WR)
  got = _responses(_read_all(s))
  assert got[0][0] == code and got[0][1]["error"]


def test_json_nested_too_deep_is_a_400_and_the_server_lives_on(server):
  body = b"[" * 100_000 + b"]" * 100_000
  s = _connect(server)
  s.sendall(b"POST /v1/models/tpurank:predict HTTP/1.1\r\nHost: x\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) +
            body)
  (code, answer), = _responses(_read_all(s))
  assert code == 400 and answer["error"]
  s = _connect(server)
  s.sendall(b"GET /v1/models/tpurank HTTP/1.1\r\nConnection: close\r\n\r\n")
  assert _responses(_read_all(s))[0][0] == 200


def test_stalled_connections_are_closed_and_connections_are_capped(server):
  first, second = _connect(server), _connect(server)
  time.sleep(0.2)  # Both accepted: the cap (2) is reached.
  third = _connect(server)
  (code, answer), = _responses(_read_all(third))
  assert code == 503 and "too many connections" in answer["error"]
  start = time.time()
  first.sendall(b"POST /v1/models/tpurank:predict HTTP/1.1\r\n")  # Stalls.
  assert _read_all(first) == b"" and _read_all(second) == b""
  assert time.time() - start < 8  # Closed by the 1 s read timeout.
  # Their slots are free again.
  s = _connect(server)
  s.sendall(b"GET /v1/models/tpurank HTTP/1.1\r\nConnection: close\r\n\r\n")
  assert _responses(_read_all(s))[0][0] == 200
