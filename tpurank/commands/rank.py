"""`tpurank rank`: the best configs of one graph, by a trained model."""


import numpy as np

from conversion import options
from schemas import npz_format
from schemas.errors import fail
from serving import model_repository
from serving import options as serving_options
from tpurank.commands import common


def add_parser(sub):
  p = sub.add_parser(
      "rank", help="rank the configs of one graph with a trained model",
      description="Scores every config of GRAPH (a TpuGraphs .npz) with an "
      "exported model and prints the best ones, with their measured "
      "runtimes when the file has them.")
  p.add_argument("--graph", required=True, help="a TpuGraphs .npz file")
  p.add_argument("--model", default=None,
                 help="SavedModel directory (e.g. OUT/export/1), or a base "
                 "directory of numbered versions (the newest is used)")
  p.add_argument("--server", default=None,
                 help="ask a model server instead: http://HOST:PORT (REST) "
                 "or grpc://HOST:PORT (gRPC), e.g. `tpurank serve` or "
                 "tensorflow_model_server")
  p.add_argument("--model-name", default=serving_options.MODEL_NAME,
                 help="model name on the server")
  p.add_argument("--model-version", type=int, default=None,
                 help="model version on the server (default: the served one)")
  p.add_argument("--k", type=int, default=None,
                 help="configs per model call (default: as many as the "
                 "call budget allows, at most by layout join "
                 f"{options.RANK_K})")
  p.add_argument("--batch", type=int, default=None,
                 help="examples per model call, for models without the "
                 f"plain-tensor signature (default: {options.RANK_BATCH})")
  p.add_argument("--top", type=int, default=5)
  common.add_guard_flags(p)
  p.add_argument("--collection", default=None,
                 help="collection name for the graph id (default: from path)")


def run(args) -> int:
  # Loaded when the command runs, not at start-up: keeps the CLI fast.
  # pylint: disable=g-import-not-at-top
  from conversion import prune  # TensorFlow ops.
  from serving import saved_model_scorer
  from trainer import default_guard
  from trainer import export
  if (args.model is None) == (args.server is None):
    raise fail("tpurank rank", "--model/--server", "exactly one of them",
               "both" if args.model else "neither")
  # Config values are checked as they stream to the model: one pass.
  graph = npz_format.load_graph(args.graph, config_values=False)
  collection = args.collection or (
      "tile:xla" if graph.kind == "tile" else "layout")
  gid = npz_format.graph_id(collection, args.graph)
  if args.server:
    from serving import client  # pylint: disable=g-import-not-at-top
    model_dir = f"{args.server} ({args.model_name})"
    scorer = client.connect(args.server, args.model_name, args.model_version)
    # The graph's arrays to the `rank` signature, pruned with the default
    # hops to send less (the model prunes again with its own hops; pruning
    # twice with the same hops changes nothing).
    sub = prune.prune(graph, options.DEFAULT_HOPS)
    scores = saved_model_scorer.score_graph_arrays(
        scorer.rank, sub, args.k or client.configs_per_request(sub))
    # A server does not say the model's calibrated margin: the guard keeps
    # the default first (never ranks it below an unproven config).
    metadata = {default_guard.METADATA_KEY: {"margin": None}}
  else:
    model_dir = model_repository.resolve_model_dir(args.model)
    scores = saved_model_scorer.SavedModelScorer(
        model_dir, args.k, args.batch).score_graph(graph, gid)
    metadata = export.metadata_or_empty(model_dir)
  default = common.guard_config(args)
  guarded = (graph.kind == "tile" and default is not None and
             default_guard.has_guard(metadata))
  if guarded and not 0 <= default < graph.num_configs:
    raise fail(args.graph, "--default-config", f"an index below "
               f"{graph.num_configs} (its configs)", str(default))
  order = (default_guard.guarded_order(
      scores, default_guard.margin_of(metadata), default) if guarded
           else np.argsort(scores, kind="stable"))
  runtime = graph.config_runtime.astype(np.float64)
  if graph.kind == "tile":
    runtime = runtime / np.maximum(graph.config_runtime_normalizers, 1)
  print(f"{args.graph}: {graph.num_configs} configs, model {model_dir}")
  if guarded:
    margin = default_guard.margin_of(metadata)
    print(f"compiler default: config {default}, kept ahead of configs the "
          "model is not confident beat it (" + (
              "margin never earned: default first" if margin is None else
              f"calibrated margin {margin:.4g}") + ")")
  has = graph.has_runtimes
  true_rank = np.argsort(np.argsort(runtime, kind="stable"), kind="stable")
  header = f"{'rank':>4} {'config':>7} {'score':>10}"
  if has:
    header += f" {'runtime' if graph.kind == 'layout' else 'rt/default':>12}"
    header += f" {'true rank':>9}"
  print(header)
  for r, i in enumerate(order[:args.top], start=1):
    line = f"{r:4d} {i:7d} {scores[i]:10.4f}"
    if has:
      line += f" {runtime[i]:12.4g} {true_rank[i] + 1:9d}"
    print(line)
  if has:
    best = runtime.min()
    print(f"best measured: config {int(np.argmin(runtime))} ({best:.4g}); "
          f"best of the top {args.top}: {runtime[order[:args.top]].min():.4g}")
  return 0
