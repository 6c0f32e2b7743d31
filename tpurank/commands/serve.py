"""`tpurank serve`: a local TF Serving–compatible server (REST and gRPC)."""

import argparse
import json
import signal
import threading

from serving import options


def _positive(text: str) -> int:
  value = int(text)
  if value < 1:
    raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text}")
  return value


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
  p.add_argument("--host", default=options.HOST,
                 help="interface to bind (0.0.0.0: all)")
  p.add_argument("--port", type=int, default=options.REST_PORT,
                 help="REST port (0: any)")
  p.add_argument("--grpc-port", type=int, default=options.GRPC_PORT,
                 help="gRPC port (0: any, -1: no gRPC)")
  p.add_argument("--poll-seconds", type=float, default=options.POLL_SECONDS,
                 help="how often to look for new versions")
  p.add_argument("--max-request-mb", type=float,
                 default=options.MAX_REQUEST_BYTES / 2**20,
                 help="larger requests are refused with 413")
  p.add_argument("--max-concurrent", type=_positive,
                 default=options.MAX_CONCURRENT,
                 help="predictions running at once; each holds a copy of "
                 "the graph per config, so this bounds the memory")
  p.add_argument("--max-examples", type=_positive,
                 default=options.MAX_EXAMPLES,
                 help="examples (graph + K configs each) per request; more "
                 "get 413")
  p.add_argument("--queue-seconds", type=float,
                 default=options.QUEUE_SECONDS,
                 help="how long a request waits for a free prediction slot "
                 "before 429 (clients retry)")
  p.add_argument("--read-timeout", type=float,
                 default=options.READ_TIMEOUT_SECONDS,
                 help="seconds a REST connection may stay idle or take to "
                 "send its request before it is closed")
  p.add_argument("--max-connections", type=_positive,
                 default=options.MAX_CONNECTIONS,
                 help="open REST connections at once; more get 503")
  p.add_argument("--max-op-copies", type=_positive,
                 default=options.MAX_OP_COPIES,
                 help="op copies per model call (trainer/call_cost.py: "
                 "~5 KB each): a request's examples run in groups within "
                 "it, one example beyond it gets 413")


def run(args) -> int:
  # Loaded when the command runs, not at start-up: keeps the CLI fast.
  # pylint: disable=g-import-not-at-top
  from serving import model_repository
  from serving import model_server
  config = model_repository.write_models_config(args.model_base)
  server = model_server.ModelServer(
      args.model_base, args.host, args.port,
      None if args.grpc_port < 0 else args.grpc_port, args.poll_seconds,
      int(args.max_request_mb * (1 << 20)), args.max_concurrent,
      args.max_examples, args.queue_seconds, args.max_op_copies,
      args.read_timeout, args.max_connections).start()
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
