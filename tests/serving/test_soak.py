"""A bounded soak of `tpurank serve`: 8 clients x 200 requests mixing good,
malformed, oversized and wrong-kind requests, with a hot swap midway."""

import base64
import collections
import concurrent.futures
import json
import random
import subprocess
import sys

import grpc
import numpy as np
import pytest

from serving import client
from serving import model_repository
from serving import protocol
from tests.serving.conftest import build_model
from tests.serving.test_model_server import _arrays
from tests.serving.test_model_server import _examples
from tests.serving.test_model_server import _post
from trainer import export

CLIENTS, REQUESTS = 8, 200
MAX_REQUEST_MB = 1


def _vm_kb(pid: int, field: str) -> int:
  with open(f"/proc/{pid}/status") as f:
    for line in f:
      if line.startswith(field + ":"):
        return int(line.split()[1])
  raise KeyError(field)


def _requests(layout_npz, tile_npz):
  """(kind, expected status, body bytes) of every request type."""
  exs = _examples(layout_npz, k=4)[:2]
  good_examples = json.dumps(protocol.rest_request(exs)).encode()
  _, arrays = _arrays(layout_npz)
  good_arrays = protocol.to_json(protocol.rest_rank_request(arrays))
  _, tile = _arrays(tile_npz)
  wrong_kind = protocol.to_json(protocol.rest_rank_request(tile))
  nan = dict(arrays, node_feat=np.where(
      np.arange(arrays["node_feat"].size).reshape(
          arrays["node_feat"].shape) == 7, np.nan, arrays["node_feat"]))
  # JSON has no NaN: it travels as null (to_json), read back as NaN.
  non_finite = protocol.to_json(protocol.rest_rank_request(nan))
  bad_b64 = json.dumps({"instances": [{"b64": "%%%"}]}).encode()
  not_example = json.dumps({"instances": [{"b64": base64.b64encode(
      b"\x08\x96\x01 not an example").decode()}]}).encode()
  oversized = b'{"instances": [' + b" " * (MAX_REQUEST_MB << 21) + b"]}"
  too_many = json.dumps(protocol.rest_request(exs * 9)).encode()
  return [("good", 200, good_examples), ("good", 200, good_arrays),
          ("malformed", 400, b"{not json"), ("malformed", 400, bad_b64),
          ("malformed", 400, not_example), ("nan", 400, non_finite),
          ("wrong kind", 400, wrong_kind), ("oversized", 413, oversized),
          ("too many", 413, too_many)]


@pytest.mark.slow
def test_soak_mixed_requests_with_a_hot_swap(repository, layout_npz,
                                             tile_npz, tmp_path):
  base, _ = repository
  proc = subprocess.Popen(
      [sys.executable, "-m", "tpurank.cli", "serve", "--model-base", base,
       "--port", "0", "--grpc-port", "0", "--poll-seconds", "0.2",
       "--max-request-mb", str(MAX_REQUEST_MB)],
      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
  try:
    info = json.loads(proc.stdout.readline())
    port = int(info["rest"].rsplit(":", 1)[1])
    post = lambda body: _post(port, "/v1/models/tpurank:predict", body)
    kinds = _requests(layout_npz, tile_npz)
    for _, want, body in kinds:  # Warm-up: every path traced once.
      assert post(body)[0] == want
    warm_kb = _vm_kb(proc.pid, "VmRSS")
    grpc_client = client.connect(info["grpc"])
    exs = _examples(layout_npz, k=4)[:2]
    staged = export.save(build_model(layout_npz, seed=7), "layout",
                         str(tmp_path / "staging" / "1"), {})

    def one_client(seed: int):
      rng = random.Random(seed)
      tally = collections.Counter()
      for i in range(REQUESTS):
        if seed == 0 and i == REQUESTS // 2:
          model_repository.publish(staged, base, "tpurank")  # Hot swap.
        kind, want, body = rng.choice(kinds)
        if kind == "good" and rng.random() < 0.25:
          try:  # Some good requests over gRPC.
            grpc_client.score_examples(exs)
            got = 200
          except (client.ServerError, grpc.RpcError):
            got = -1
        else:
          got = post(body)[0]
        tally[(kind, "ok" if got == want else f"got {got}")] += 1
      return tally

    with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
      tallies = list(pool.map(one_client, range(CLIENTS)))
    total = sum(tallies, collections.Counter())
    peak_kb = _vm_kb(proc.pid, "VmHWM")
    served = client.RestClient(info["rest"]).status()
  finally:
    proc.terminate()
    proc.wait(timeout=30)
  print(json.dumps({"counts": {f"{k} {r}": n for (k, r), n in
                               sorted(total.items())},
                    "warm_rss_mb": warm_kb / 1024,
                    "peak_rss_mb": peak_kb / 1024}))
  assert sum(total.values()) == CLIENTS * REQUESTS
  wrong = {k: n for k, n in total.items() if k[1] != "ok"}
  assert not wrong, wrong  # No failed good request, every bad one refused.
  assert {k for k, _ in total} == {k for k, _, _ in kinds}
  assert served["model_version_status"][0]["version"] == "2"
  # Bounded: the mix adds little to the warmed-up server (tiny graphs).
  assert peak_kb - warm_kb < 600 * 1024, (warm_kb, peak_kb)
