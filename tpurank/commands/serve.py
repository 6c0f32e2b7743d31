"""`tpurank serve`: a local TF Serving–compatible server (REST and gRPC)."""

import json
import signal
import threading


def add_parser(sub):
  p = sub.add_parser(
      "serve", help="serve a model repository over TF Serving's REST and "
      "gRPC APIs",
      description="Serves every <name>/<version>/ SavedModel under "
      "MODEL_BASE (the newest version of each; new versions are picked up "
      "without downtime) with TF Serving's REST API (/v1/models/<name>"
      "[:predict]) and gRPC PredictionService/ModelService. Also writes "
      "MODEL_BASE/models.config for the real tensorflow_model_server.")
  p.add_argument("--model-base", required=True,
                 help="repository: <base>/<name>/<version>/saved_model.pb")
  p.add_argument("--host", default="127.0.0.1",
                 help="interface to bind (0.0.0.0: all)")
  p.add_argument("--port", type=int, default=8501, help="REST port (0: any)")
  p.add_argument("--grpc-port", type=int, default=8500,
                 help="gRPC port (0: any, -1: no gRPC)")
  p.add_argument("--poll-seconds", type=float, default=2.0,
                 help="how often to look for new versions")
  p.add_argument("--max-request-mb", type=float, default=64.0,
                 help="larger requests are refused with 413")


def run(args) -> int:
  # pylint: disable=g-import-not-at-top
  from serving import model_repository
  from serving import model_server
  config = model_repository.write_models_config(args.model_base)
  server = model_server.ModelServer(
      args.model_base, args.host, args.port,
      None if args.grpc_port < 0 else args.grpc_port, args.poll_seconds,
      int(args.max_request_mb * (1 << 20))).start()
  print(json.dumps({
      "models": server.manager.served(),
      "rest": f"http://{args.host}:{server.rest_port}",
      "grpc": (f"grpc://{args.host}:{server.grpc_port}"
               if server.grpc_port else None),
      "models_config": config}), flush=True)
  print("serving; Ctrl-C stops", flush=True)
  done = threading.Event()
  signal.signal(signal.SIGTERM, lambda *_: done.set())
  try:
    done.wait()
  except KeyboardInterrupt:
    pass
  server.stop()
  return 0
