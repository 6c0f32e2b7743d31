"""`tpurank pipeline run|compile`: the TFX pipeline, locally or for Vertex AI."""

import json
import os

from conversion import graph_files
from schemas import npz_format
from schemas.errors import fail
from serving import model_repository
from tpurank import console
from trainer import hparams as hparams_lib

# Unknown flags are Beam pipeline options for the Beam-based steps.
ACCEPTS_BEAM_ARGS = True


def _add_training_flags(p):
  """The training budget and blessing threshold (run and compile)."""
  p.add_argument("--max-minutes", type=float,
                 default=hparams_lib.TrainConfig.max_minutes,
                 help="training time budget (wall clock)")
  p.add_argument("--threshold", type=float, default=None,
                 help="blessing threshold (layout: least Kendall tau; tile: "
                 "most top-5 error)")


def add_parser(sub):
  p = sub.add_parser(
      "pipeline", help="run the TFX pipeline locally, or compile it for "
      "Vertex AI Pipelines",
      description="ExampleGen (Beam conversion of the collection's own "
      "train/valid splits) -> Trainer -> RankingEvaluator (Kendall tau, OPA, "
      "top-K error; blesses the model) -> Pusher (versioned serving "
      "directory).")
  actions = p.add_subparsers(dest="action", metavar="ACTION")
  actions.required = True
  r = actions.add_parser("run", help="run locally (SQLite MLMD store; "
                         "unchanged steps come from TFX's cache)")
  r.add_argument("--data", required=True,
                 help="directory holding npz/... (as `tpurank synth` writes)")
  r.add_argument("--collection", required=True,
                 choices=npz_format.COLLECTIONS)
  r.add_argument("--runner", choices=("local", "beam"), default="local",
                 help="TFX orchestrator")
  r.add_argument("--beam-runner", default=None,
                 help="Beam runner of ExampleGen's conversion (Beam's "
                 "--runner, which names the orchestrator here), e.g. "
                 "DaskRunner with --dask_client_address HOST:PORT (default: "
                 "the multi-processing DirectRunner)")
  r.add_argument("--work-dir", default="tpurank_pipeline",
                 help="pipeline root, MLMD store, serving dir and dead "
                 "letters go here")
  r.add_argument("--serving-dir", default=None,
                 help="Pusher destination (default WORK_DIR/serving/tpurank)")
  _add_training_flags(r)
  r.add_argument("--no-cache", action="store_true")
  r.add_argument("--allow-dead-letters", action="store_true")
  r.add_argument("--show-top", type=int, default=5,
                 help="print this many predicted-best configs of one "
                 "validation graph beside their true runtimes")
  c = actions.add_parser("compile", help="compile for Vertex AI Pipelines "
                         "(KubeflowV2DagRunner)")
  c.add_argument("--target", choices=("vertex",), required=True)
  c.add_argument("--project", required=True)
  c.add_argument("--region", required=True)
  c.add_argument("--image", required=True,
                 help="container image with tpurank installed")
  c.add_argument("--out", required=True, help="pipeline JSON to write")
  c.add_argument("--collection", default="layout:xla:random",
                 choices=npz_format.COLLECTIONS)
  c.add_argument("--data", default=None,
                 help="data directory (default gs://PROJECT-tpurank/data)")
  c.add_argument("--root", default=None,
                 help="pipeline root (default gs://PROJECT-tpurank/root)")
  c.add_argument("--serving-dir", default=None,
                 help="Pusher destination (default "
                 "gs://PROJECT-tpurank/serving/tpurank)")
  c.add_argument("--tpu", action="store_true",
                 help="train on a Vertex TPU worker pool (TPUStrategy)")
  c.add_argument("--tpu-topology", default=None, metavar="TOPOLOGY",
                 help="train on a TPU pod slice of this topology, e.g. 2x2x1 "
                 "(TPUStrategy; accelerator in pipeline/configs.py)")
  c.add_argument("--workers", type=int, default=1,
                 help="training replicas on CPU machines: N > 1 asks Vertex "
                 "for a chief pool of 1 and a worker pool of N-1 "
                 "(MultiWorkerMirroredStrategy over TF_CONFIG)")
  _add_training_flags(c)
  c.add_argument("--submit", action="store_true",
                 help="submit to Vertex AI after compiling (needs Google "
                 "Cloud credentials)")
  h = actions.add_parser(
      "rehearse", help="run a compiled Vertex spec on this machine, task by "
      "task, as Vertex would (compile it with local --data/--root/"
      "--serving-dir and --runner=DirectRunner)")
  h.add_argument("--spec", required=True, help="the compiled pipeline JSON")
  h.add_argument("--root", required=True,
                 help="local directory standing in for the pipeline root")


def run(args) -> int:
  return {"run": _run, "compile": _compile,
          "rehearse": _rehearse}[args.action](args)


def _rehearse(args) -> int:
  # pylint: disable=g-import-not-at-top
  from pipeline import rehearsal
  print(f"rehearsing {args.spec} under {args.root} (each task's container "
        "command, in DAG order, on this machine)", flush=True)
  try:
    result = rehearsal.run(args.spec, args.root)
  except rehearsal.RehearsalError as e:
    print(f"tpurank: error: {str(e).splitlines()[0]}", file=console.err())
    return 1
  for name in result.order:
    print(f"  {name}: ran" + (f" (log {result.logs[name]})"
                              if name in result.logs else ""))
  for note in result.replaced:
    print(f"  not as on Vertex: {note}")
  pushed = result.outputs.get("Pusher", {}).get("pushed_model", [])
  print(json.dumps({"pushed": bool(pushed and pushed[0].get(
      "metadata", {}).get("pushed")), "order": result.order}))
  return 0


def _run(args) -> int:
  # Loaded when the command runs, not at start-up: keeps the CLI fast.
  # pylint: disable=g-import-not-at-top
  from pipeline import configs
  from pipeline import pipeline as pipeline_lib
  from pipeline import run_report
  from pipeline import runners
  from conversion import convert_job
  convert_job.split_files(args.data, args.collection)  # Clear error early.
  if args.beam_runner:
    args.beam_args = [f"--runner={args.beam_runner}", *args.beam_args]
  convert_job.pipeline_options(args.beam_args)  # Unknown flags too.
  paths = pipeline_lib.local_paths(os.path.abspath(args.work_dir))
  serving_dir = os.path.abspath(args.serving_dir or paths["serving_dir"])
  hparams = {"max_minutes": args.max_minutes}
  os.makedirs(os.path.dirname(paths["metadata"]), exist_ok=True)
  pipeline = pipeline_lib.create_pipeline(
      configs.PIPELINE_NAME, paths["pipeline_root"],
      os.path.abspath(args.data), args.collection, serving_dir,
      train_hparams=hparams, threshold=args.threshold,
      dead_letter_dir=paths["dead_letter_dir"],
      allow_dead_letters=args.allow_dead_letters,
      metadata_connection_config=runners.sqlite_metadata(paths["metadata"]),
      beam_pipeline_args=args.beam_args, enable_cache=not args.no_cache)
  print(f"running the TFX pipeline ({args.runner}) on {args.collection}; "
        f"artifacts in {paths['pipeline_root']}", flush=True)
  runners.run(pipeline, args.runner)
  report = run_report.summary(paths["metadata"])
  print("\nsteps (newest execution):")
  for name, state in sorted(report["executions"].items()):
    print(f"  {name}: {state}")
  ev = report["evaluation"]
  print(f"\nvalidation metrics ({args.collection}; on `tpurank synth` data "
        "the runtimes are simulated):")
  print("\n".join(run_report.format_metrics(ev)))
  if ev:
    print(f"\n{'BLESSED' if ev['blessed'] else 'NOT BLESSED'}: "
          f"{ev['reason']}")
  pushed = report["pushed_model"]
  print(f"pushed model: {pushed or 'none (not blessed)'}")
  model_dir = pushed or model_repository.newest(serving_dir)
  # The top-configs table reads one .npz graph of the valid split.
  valid = [f for f in graph_files.split_files(args.data, args.collection,
                                              "valid") if f.endswith(".npz")]
  if model_dir and valid and args.show_top:
    rows = run_report.top_configs(model_dir, valid[0], args.collection,
                                  args.show_top)
    n = npz_format.load_graph(valid[0]).num_configs
    print(f"\npredicted top {len(rows)} of {n} configs of "
          f"{npz_format.graph_id(args.collection, valid[0])}:")
    print("| predicted rank | config | score | true runtime | true rank |")
    print("|---|---|---|---|---|")
    for i, r in enumerate(rows):
      print(f"| {i + 1} | {r['config']} | {r['score']:.3f} | "
            f"{r['runtime']:.0f} | {r['true_rank']} |")
  print(json.dumps({"pushed_model": pushed, "blessed":
                    bool(ev and ev["blessed"])}))
  return 0


def _compile(args) -> int:
  # Loaded when the command runs, not at start-up: keeps the CLI fast.
  # pylint: disable=g-import-not-at-top
  from conversion import beam_args
  from pipeline import configs
  from pipeline import pipeline as pipeline_lib
  from pipeline import runners
  if args.workers < 1 or (args.workers > 1 and (args.tpu or
                                                 args.tpu_topology)):
    raise fail("<command line>", "--workers",
               "1 with --tpu or --tpu-topology (a TPU's hosts are one pool), "
               "else at least 1", str(args.workers))
  if args.tpu_topology:
    try:
      configs.tpu_topology_chips(args.tpu_topology)
    except ValueError:
      raise fail("<command line>", "--tpu-topology", "sizes joined by 'x', "
                 "e.g. 2x2x1", repr(args.tpu_topology)) from None
  bucket = f"gs://{args.project}-tpurank"
  root = args.root or f"{bucket}/root"
  pipeline = pipeline_lib.create_pipeline(
      configs.PIPELINE_NAME, root, args.data or f"{bucket}/data",
      args.collection,
      args.serving_dir or f"{bucket}/serving/{configs.MODEL_NAME}",
      train_hparams={"max_minutes": args.max_minutes},
      threshold=args.threshold,
      dead_letter_dir=f"{root}/dead_letters",
      beam_pipeline_args=beam_args.merge(
          configs.dataflow_args(args.project, args.region, bucket,
                                args.image), args.beam_args),
      vertex={"project": args.project, "region": args.region,
              "image": args.image, "tpu": args.tpu, "workers": args.workers,
              "tpu_topology": args.tpu_topology})
  out = runners.compile_vertex(pipeline, args.image, args.out)
  print(f"wrote {out}")
  if args.submit:
    job = runners.submit_vertex(out, args.project, args.region, root)
    print(f"submitted: {job}")
  return 0
