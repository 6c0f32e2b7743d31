"""Tests for the local TF Serving–compatible server and its clients."""

import base64
import dataclasses
import json
import os
import threading
import time
import types
import urllib.error
import urllib.request

import grpc
import numpy as np
import pytest
from tensorflow_serving.apis import get_model_metadata_pb2
from tensorflow_serving.apis import get_model_status_pb2
from tensorflow_serving.apis import model_service_pb2_grpc
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc

from conversion import examples
from conversion import prune
from schemas import graph_tensor
from schemas import npz_format
from serving import call_budget
from serving import client
from serving import model_repository
from serving import model_server
from serving import protocol
from serving import saved_model_scorer
from tests.serving.conftest import build_model
from tpurank import cli
from trainer import call_cost
from trainer import export


@pytest.fixture
def server(repository):
  base, _ = repository
  srv = model_server.ModelServer(base, rest_port=0, grpc_port=0,
                                 poll_seconds=0.2,
                                 max_request_bytes=2 << 20).start()
  yield srv
  srv.stop()


def _post(port, path, data: bytes):
  req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data,
                               headers={"Content-Type": "application/json"})
  try:
    with urllib.request.urlopen(req, timeout=120) as r:
      return r.status, json.loads(r.read())
  except urllib.error.HTTPError as e:
    return e.code, json.loads(e.read())


def test_rest_and_grpc_rank_like_the_saved_model(server, repository,
                                                 layout_npz):
  _, path = repository
  g = npz_format.load_graph(layout_npz)
  local = saved_model_scorer.SavedModelScorer(path, k=5, batch=3)
  want = local.score_graph(g, "layout:x:g")
  for c in (client.connect(f"http://127.0.0.1:{server.rest_port}"),
            client.connect(f"grpc://127.0.0.1:{server.grpc_port}")):
    got = saved_model_scorer.score_graph(c.score_examples, g, "layout:x:g",
                                         k=5, batch=3)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_status_endpoints(server):
  rest = client.RestClient(f"http://127.0.0.1:{server.rest_port}")
  status = rest.status()["model_version_status"][0]
  assert status["version"] == "1" and status["state"] == "AVAILABLE"
  stub = model_service_pb2_grpc.ModelServiceStub(
      grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}"))
  req = get_model_status_pb2.GetModelStatusRequest()
  req.model_spec.name = "tpurank"
  got = stub.GetModelStatus(req, timeout=30).model_version_status[0]
  assert got.version == 1 and got.state == (
      get_model_status_pb2.ModelVersionStatus.AVAILABLE)


def _get(port, path):
  try:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}",
                                timeout=60) as r:
      return r.status, json.loads(r.read())
  except urllib.error.HTTPError as e:
    return e.code, json.loads(e.read())


def test_metadata_answers_as_tf_serving(server, repository):
  """REST GET .../metadata and gRPC GetModelMetadata: the SavedModel's own
  signatures, so a client without tpurank can learn the `rank` inputs."""
  _, path = repository
  status, rest = _get(server.rest_port, "/v1/models/tpurank/metadata")
  assert status == 200
  assert rest["model_spec"] == {"name": "tpurank", "signature_name": "",
                                "version": "1"}
  defs = rest["metadata"]["signature_def"]["signature_def"]
  rank = defs["rank"]
  assert rank["method_name"] == "tensorflow/serving/predict"
  feat = rank["inputs"]["node_config_feat"]
  assert feat["dtype"] == "DT_FLOAT"
  assert [d["size"] for d in feat["tensor_shape"]["dim"]] == ["-1", "-1",
                                                              "18"]
  assert set(rank["inputs"]) == {"node_feat", "node_opcode", "edge_index",
                                 "node_config_ids", "node_config_feat"}
  assert rank["outputs"]["scores"]["dtype"] == "DT_FLOAT"
  assert defs["serving_default"]["inputs"]["examples"]["dtype"] == (
      "DT_STRING")
  assert _get(server.rest_port,
              "/v1/models/tpurank/versions/1/metadata")[1] == rest
  assert _get(server.rest_port, "/v1/models/nope/metadata")[0] == 404

  stub = prediction_service_pb2_grpc.PredictionServiceStub(
      grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}"))
  req = get_model_metadata_pb2.GetModelMetadataRequest()
  req.model_spec.name = "tpurank"
  with pytest.raises(grpc.RpcError) as e:  # No metadata_field: refused.
    stub.GetModelMetadata(req, timeout=30)
  assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
  req.metadata_field.append("signature_def")
  got = stub.GetModelMetadata(req, timeout=30)
  assert got.model_spec.name == "tpurank" and got.model_spec.version.value == 1
  sig_map = get_model_metadata_pb2.SignatureDefMap()
  assert got.metadata["signature_def"].Unpack(sig_map)
  assert sig_map == protocol.signature_defs(path)
  assert set(sig_map.signature_def) >= {"serving_default", "rank"}
  for field, name, code in (("labels", "tpurank",
                             grpc.StatusCode.INVALID_ARGUMENT),
                            ("signature_def", "nope",
                             grpc.StatusCode.NOT_FOUND)):
    bad = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=[
        field])
    bad.model_spec.name = name
    with pytest.raises(grpc.RpcError) as e:
      stub.GetModelMetadata(bad, timeout=30)
    assert e.value.code() == code


@pytest.mark.parametrize("path,body,code", [
    ("/v1/models/tpurank:predict", b"{not json", 400),
    ("/v1/models/tpurank:predict", b'{"instances": []}', 400),
    ("/v1/models/tpurank:predict", b'{"instances": [{"b64": "!!"}]}', 400),
    ("/v1/models/tpurank:predict", json.dumps({"instances": [{
        "b64": base64.b64encode(b"not an example").decode()}]}).encode(),
     400),
    ("/v1/models/tpurank:predict", b'{"instances": [1, 2]}', 400),
    ("/v1/models/nope:predict", json.dumps(protocol.rest_request(
        [b""])).encode(), 404),
    ("/v1/models/tpurank/versions/7:predict", json.dumps(
        protocol.rest_request([b""])).encode(), 404),
    ("/v2/other", b"{}", 404),
    ("/v1/models/tpurank:predict", b"x" * (3 << 20), 413),
])
def test_bad_rest_requests_get_4xx_json_and_the_server_lives_on(
    server, repository, layout_npz, path, body, code):
  status, answer = _post(server.rest_port, path, body)
  assert status == code and answer["error"]
  # Still serving.
  g = npz_format.load_graph(layout_npz)
  rest = client.connect(f"http://127.0.0.1:{server.rest_port}")
  assert not np.isnan(saved_model_scorer.score_graph(
      rest.score_examples, g, "x")).any()


def test_bad_grpc_requests_get_status_codes(server):
  stub = client.GrpcClient(f"127.0.0.1:{server.grpc_port}")
  with pytest.raises(client.ServerError, match="INVALID_ARGUMENT"):
    stub.score_examples([b"not an example"])
  with pytest.raises(client.ServerError, match="NOT_FOUND"):
    client.GrpcClient(f"127.0.0.1:{server.grpc_port}",
                      model="nope").score_examples([b""])
  with pytest.raises(client.ServerError, match="RESOURCE_EXHAUSTED"):
    stub.score_examples([b"x" * (3 << 20)])
  request = predict_pb2.PredictRequest()
  request.model_spec.name = "tpurank"
  with pytest.raises(grpc.RpcError) as e:
    stub._stub.Predict(request, timeout=30)  # pylint: disable=protected-access
  assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


@pytest.fixture
def small_server(repository):
  """One prediction at a time, at most 3 examples, no waiting for a slot."""
  base, _ = repository
  srv = model_server.ModelServer(base, rest_port=0, grpc_port=0,
                                 max_concurrent=1, max_examples=3,
                                 queue_seconds=0.0).start()
  yield srv
  srv.stop()


def _examples(layout_npz, k=4):
  g = npz_format.load_graph(layout_npz)
  return list(examples.graph_examples(g, "layout:x:g", k, "test", hops=2))


def test_busy_server_answers_429_and_resource_exhausted(small_server,
                                                        layout_npz):
  exs = _examples(layout_npz)[:2]
  rest = client.RestClient(f"http://127.0.0.1:{small_server.rest_port}",
                           retries=0)
  grpc_client = client.GrpcClient(f"127.0.0.1:{small_server.grpc_port}",
                                  retries=0)
  # Occupy the only prediction slot, as a long prediction would.
  assert small_server.predictor.slots.acquire(timeout=1)
  try:
    status, answer = _post(small_server.rest_port,
                           "/v1/models/tpurank:predict",
                           json.dumps(protocol.rest_request(exs)).encode())
    assert status == 429 and "busy" in answer["error"]
    with pytest.raises(client.ServerBusy, match="HTTP 429"):
      rest.score_examples(exs)
    with pytest.raises(client.ServerBusy, match="RESOURCE_EXHAUSTED"):
      grpc_client.score_examples(exs)
  finally:
    small_server.predictor.slots.release()
  scores, _ = rest.score_examples(exs)
  assert scores.shape[0] == 2 and np.isfinite(scores).all()


def test_clients_retry_until_a_slot_frees(small_server, layout_npz):
  exs = _examples(layout_npz)[:2]
  assert small_server.predictor.slots.acquire(timeout=1)
  threading.Timer(1.5, small_server.predictor.slots.release).start()
  for c in (client.RestClient(f"http://127.0.0.1:{small_server.rest_port}"),
            client.GrpcClient(f"127.0.0.1:{small_server.grpc_port}")):
    scores, _ = c.score_examples(exs)
    assert np.isfinite(scores).all()


def test_too_many_examples_per_request_are_refused(small_server, layout_npz):
  exs = _examples(layout_npz, k=2)[:4]
  assert len(exs) == 4
  status, answer = _post(small_server.rest_port, "/v1/models/tpurank:predict",
                         json.dumps(protocol.rest_request(exs)).encode())
  assert status == 413 and "limit is 3" in answer["error"]
  with pytest.raises(client.ServerError, match="RESOURCE_EXHAUSTED.*limit"):
    client.GrpcClient(f"127.0.0.1:{small_server.grpc_port}").score_examples(
        exs)
  # Chunked to the limit, the same graph ranks.
  g = npz_format.load_graph(layout_npz)
  got = saved_model_scorer.score_graph(
      client.connect(f"grpc://127.0.0.1:{small_server.grpc_port}")
      .score_examples, g, "x", k=2, batch=3)
  assert got.shape == (g.num_configs,) and np.isfinite(got).all()


def test_large_requests_run_in_groups_with_the_same_scores(repository,
                                                           layout_npz):
  base, path = repository
  exs = _examples(layout_npz, k=3)[:3]
  copies = [call_budget.op_copies(e) for e in exs]
  pruned = prune.prune(npz_format.load_graph(layout_npz), 2)
  # The late join: the pruned graph once, and rows per config.
  assert copies == [call_cost.example_cost(
      pruned.num_nodes, 3, len(pruned.node_config_ids), "late")] * 3
  assert copies[0] < call_cost.example_cost(
      pruned.num_nodes, 3, len(pruned.node_config_ids), "early")
  want = saved_model_scorer.SavedModelScorer(path).score_examples(exs)
  with model_server.ModelServer(base, rest_port=0, grpc_port=None,
                                max_op_copies=max(copies)) as srv:
    got = client.RestClient(
        f"http://127.0.0.1:{srv.rest_port}").score_examples(exs)
    assert srv.predictor.calls == 3  # One example per model call.
  np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(got[1], want[1])


def test_new_version_is_picked_up_without_failed_requests(
    server, repository, layout_npz, tmp_path):
  base, _ = repository
  g = npz_format.load_graph(layout_npz)
  rest = client.RestClient(f"http://127.0.0.1:{server.rest_port}")
  old = saved_model_scorer.score_graph(rest.score_examples, g, "x")
  errors, stop = [], threading.Event()

  def hammer():
    while not stop.is_set():
      try:
        saved_model_scorer.score_graph(rest.score_examples, g, "x")
      except Exception as e:  # pylint: disable=broad-except
        errors.append(e)

  worker = threading.Thread(target=hammer)
  worker.start()
  staged = export.save(build_model(layout_npz, seed=7), "layout",
                       str(tmp_path / "staging" / "1"), {})
  model_repository.publish(staged, base, "tpurank")
  deadline = time.time() + 60
  while server.manager.served()["tpurank"] != 2 and time.time() < deadline:
    time.sleep(0.1)
  stop.set()
  worker.join()
  assert server.manager.served()["tpurank"] == 2
  assert rest.status()["model_version_status"][0]["version"] == "2"
  assert not errors
  new = saved_model_scorer.score_graph(rest.score_examples, g, "x")
  assert not np.allclose(new, old)


def test_models_config_names_every_model(repository):
  base, _ = repository
  path = model_repository.write_models_config(base, container_base="/models")
  text = open(path).read()
  assert 'name: "tpurank"' in text
  assert 'base_path: "/models/tpurank"' in text
  assert model_repository.models(base) == {"tpurank": [1]}


def test_rank_command_through_the_server(server, repository, layout_npz,
                                         capsys):
  _, path = repository
  for url in (f"http://127.0.0.1:{server.rest_port}",
              f"grpc://127.0.0.1:{server.grpc_port}"):
    assert cli.main(["rank", "--graph", layout_npz, "--server", url,
                     "--top", "3", "--k", "7"]) == 0
    rows = [l.split() for l in capsys.readouterr().out.splitlines()
            if l.strip()[:1].isdigit()]
    scores = saved_model_scorer.SavedModelScorer(path).score_graph(
        npz_format.load_graph(layout_npz), "x")
    assert [int(r[1]) for r in rows] == list(
        np.argsort(scores, kind="stable")[:3])


def test_rank_without_a_server_says_so(layout_npz, capsys):
  assert cli.main(["rank", "--graph", layout_npz, "--server",
                   "http://127.0.0.1:9"]) == 2
  err = capsys.readouterr().err
  assert "--server" in err and "tpurank serve" in err
  assert os.path.exists(layout_npz)


@pytest.mark.slow
def test_serve_command_starts_answers_and_stops(repository):
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  base, _ = repository
  proc = subprocess.Popen(
      [sys.executable, "-m", "tpurank.cli", "serve", "--model-base", base,
       "--port", "0", "--grpc-port", "0"], stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True)
  try:
    info = json.loads(proc.stdout.readline())
    assert info["models"] == {"tpurank": 1}
    assert os.path.exists(info["models_config"])
    status = client.RestClient(info["rest"]).status()
    assert status["model_version_status"][0]["state"] == "AVAILABLE"
  finally:
    proc.terminate()
    assert proc.wait(timeout=30) == 0


def _arrays(npz, hops=1):
  """The `rank` request of a graph: its pruned arrays, every config."""
  g = prune.prune(npz_format.load_graph(npz), hops)
  arrays = {"node_feat": g.node_feat, "node_opcode": g.node_opcode,
            "edge_index": g.edge_index}
  feat = g.take_config_feat(np.arange(g.num_configs))
  if g.kind == "tile":
    arrays["config_feat"] = feat
  else:
    arrays["node_config_ids"] = g.node_config_ids
    arrays["node_config_feat"] = feat
  return g, arrays


def test_rank_signature_over_rest_and_grpc_scores_like_in_process(
    server, repository, layout_npz):
  _, path = repository
  g, arrays = _arrays(layout_npz)
  local = saved_model_scorer.SavedModelScorer(path)
  want = local.score_graph(npz_format.load_graph(layout_npz), "x", hops=1)
  assert len(want) == g.num_configs
  for url in (f"http://127.0.0.1:{server.rest_port}",
              f"grpc://127.0.0.1:{server.grpc_port}"):
    got = client.connect(url).rank(**arrays)["scores"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # In chunks of configs, as `tpurank rank --server` sends them.
    chunked = saved_model_scorer.score_graph_arrays(
        client.connect(url).rank, g, 3)
    np.testing.assert_allclose(chunked, want, rtol=1e-5, atol=1e-6)


def test_packed_and_plain_rank_requests_score_alike(server, layout_npz):
  g, arrays = _arrays(layout_npz)
  packed = protocol.pack_configs(arrays)
  assert len(packed[protocol.PACKED_CONFIG_INPUT]) == (
      arrays["node_config_feat"].size)
  stub = prediction_service_pb2_grpc.PredictionServiceStub(
      grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}"))
  scores = {}
  for name, inputs in (("plain", arrays), ("packed", packed)):
    body = protocol.rest_rank_request(inputs)
    assert body["signature_name"] == protocol.rank_signature_for(inputs)
    status, out = _post(server.rest_port, "/v1/models/tpurank:predict",
                        protocol.to_json(body))
    assert status == 200, out
    scores[name] = protocol.parse_rest_rank_response(out)
    response = stub.Predict(protocol.grpc_rank_request(inputs, "tpurank"),
                            timeout=60)
    assert response.model_spec.signature_name == body["signature_name"]
    np.testing.assert_allclose(protocol.parse_grpc_rank_response(response),
                               scores[name], rtol=1e-6)
  assert len(scores["plain"]) == g.num_configs
  np.testing.assert_allclose(scores["packed"], scores["plain"], rtol=1e-6)


def test_clients_fall_back_to_rank_for_a_model_without_rank_packed(
    server, layout_npz):
  _, arrays = _arrays(layout_npz)
  manager = server.predictor.manager
  want = client.connect(f"http://127.0.0.1:{server.rest_port}").rank(
      **arrays)["scores"]
  with manager._lock:  # pylint: disable=protected-access
    manager._models["tpurank"] = dataclasses.replace(  # As exported before.
        manager._models["tpurank"], rank_packed=None)
  for url in (f"http://127.0.0.1:{server.rest_port}",
              f"grpc://127.0.0.1:{server.grpc_port}"):
    c = client.connect(url)
    np.testing.assert_allclose(c.rank(**arrays)["scores"], want, rtol=1e-6)
    assert c.packed is False


def test_plain_rank_requests_split_to_fit_the_size_limit(monkeypatch):
  values = 2 * 18  # Two configurable ops.
  monkeypatch.setattr(client.options, "MAX_REQUEST_BYTES",
                      2 * client.JSON_VALUE_BYTES * values * 3)
  sent = []

  def send(inputs):
    sent.append(len(inputs["node_config_feat"]))
    return {"scores": inputs["node_config_feat"][:, 0, 0]}

  feat = np.arange(8 * values, dtype=np.float32).reshape(8, 2, 18)
  plain = types.SimpleNamespace(packed=False)  # A model without rank_packed.
  out = client.packed_or_plain(plain, send, {"node_config_feat": feat})
  assert sent == [3, 3, 2]
  np.testing.assert_array_equal(out["scores"], feat[:, 0, 0])


def test_rank_refuses_bad_config_values_and_bytes(server, layout_npz):
  _, arrays = _arrays(layout_npz)
  outside = dict(arrays, node_config_feat=np.where(
      arrays["node_config_feat"] == 0, 7.0, arrays["node_config_feat"]))
  assert protocol.pack_configs(outside) is not None  # 7 fits an int8 ...
  truncated = protocol.pack_configs(arrays)
  truncated[protocol.PACKED_CONFIG_INPUT] = truncated[
      protocol.PACKED_CONFIG_INPUT][:-1]
  for inputs, fragment in (
      (outside, "node_config_feat: expected -1 or a dimension index"),
      (protocol.pack_configs(outside),  # ... but not the format.
       "node_config_feat: expected -1 or a dimension index"),
      (truncated, "node_config_bytes: expected configs x")):
    status, body = _post(server.rest_port, "/v1/models/tpurank:predict",
                         protocol.to_json(protocol.rest_rank_request(
                             inputs)))
    assert status == 400 and fragment in body["error"], body
  status, body = _post(server.rest_port, "/v1/models/tpurank:predict",
                       protocol.to_json({
                           "signature_name": protocol.RANK_PACKED_SIGNATURE,
                           "inputs": dict(truncated, node_config_bytes=[1])}))
  assert status == 400 and "node_config_bytes" in body["error"], body


def test_rank_signature_refuses_the_other_kind_and_non_finite_input(
    server, layout_npz, tile_npz):
  _, tile = _arrays(tile_npz)
  _, layout = _arrays(layout_npz)
  layout["node_feat"] = layout["node_feat"].astype(np.float32)
  layout["node_feat"][0, 0] = np.nan
  for arrays, fragment in ((tile, "other kind"), (layout, "node_feat")):
    status, body = _post(server.rest_port, "/v1/models/tpurank:predict",
                         protocol.to_json(protocol.rest_rank_request(
                             arrays)))
    assert status == 400 and fragment in body["error"], body
    stub = prediction_service_pb2_grpc.PredictionServiceStub(
        grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}"))
    with pytest.raises(grpc.RpcError) as e:
      stub.Predict(protocol.grpc_rank_request(arrays, "tpurank"), timeout=30)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert fragment in e.value.details()


def test_one_example_over_the_call_budget_is_refused_not_run(repository,
                                                             layout_npz):
  base, _ = repository
  exs = _examples(layout_npz, k=8)[:1]
  cost = call_budget.op_copies(exs[0])
  with model_server.ModelServer(base, rest_port=0, grpc_port=0,
                                max_op_copies=int(cost) - 1) as srv:
    status, body = _post(srv.rest_port, "/v1/models/tpurank:predict",
                         json.dumps(protocol.rest_request(exs)).encode())
    assert status == 413 and "call budget" in body["error"]
    assert srv.predictor.calls == 0  # Refused before any model call.
    with pytest.raises(client.ServerError, match="RESOURCE_EXHAUSTED"):
      client.connect(f"grpc://127.0.0.1:{srv.grpc_port}").score_examples(exs)


def test_examples_with_non_finite_features_get_400_not_nan(server,
                                                           layout_npz):
  g = prune.prune(npz_format.load_graph(layout_npz), 1)
  feat = g.node_feat.astype(np.float32)
  feat[1, 2] = np.inf
  bad = dataclasses.replace(g, node_feat=feat)
  idx = np.arange(3)
  ex = graph_tensor.serialize(graph_tensor.build(
      bad, "x", idx, g.take_config_feat(idx)))
  status, body = _post(server.rest_port, "/v1/models/tpurank:predict",
                       json.dumps(protocol.rest_request([ex])).encode())
  assert status == 400 and "op.feat" in body["error"], body


def test_a_tile_example_to_a_layout_model_is_400_not_scores(server,
                                                            tile_npz):
  g = npz_format.load_graph(tile_npz)
  exs = list(examples.graph_examples(g, "tile:xla:t", 4, "test", hops=-1))
  status, body = _post(server.rest_port, "/v1/models/tpurank:predict",
                       json.dumps(protocol.rest_request(exs[:1])).encode())
  assert status == 400 and "layout model" in body["error"], body
