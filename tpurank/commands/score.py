"""`tpurank score`: batch-score collections into a Kaggle submission (Beam)."""

import json

from conversion import options
from schemas import npz_format
from tpurank import console
from tpurank.commands import common

ACCEPTS_BEAM_ARGS = True


def add_parser(sub):
  p = sub.add_parser(
      "score", help="score every config of every graph into a Kaggle "
      "submission CSV (Beam RunInference)",
      description="Scores DATA/npz/<collection>/<split>/*.npz with the "
      "model(s) and writes OUT (ID,TopConfigs: tile: the 5 best config "
      "indices; layout: every config index, best first, ';'-separated), "
      "OUT.metrics.jsonl (per-graph metrics where runtimes exist), "
      "OUT.dead_letters.jsonl and OUT.summary.json. Further flags are Beam "
      "pipeline options (default: DirectRunner over all cores).")
  p.add_argument("--model", required=True, action="append",
                 help="SavedModel dir or base of versions; repeat to give a "
                 "tile and a layout model (each graph gets the model of its "
                 "collection, else of its kind)")
  p.add_argument("--data", required=True,
                 help="directory holding npz/... (as `tpurank synth` writes)")
  p.add_argument("--collection", default=None, choices=npz_format.COLLECTIONS,
                 help="only this collection (default: every one found)")
  p.add_argument("--split", default="test", choices=("train", "valid",
                                                       "test"))
  p.add_argument("--out", required=True, help="submission CSV to write")
  p.add_argument("--k", type=int, default=options.EVAL_K,
                 help="configs per example")
  common.add_guard_flags(p)
  p.add_argument("--allow-dead-letters", action="store_true",
                 help="exit 0 even if some graphs could not be scored")


def run(args) -> int:
  # Loaded when the command runs, not at start-up: keeps the CLI fast.
  # pylint: disable=g-import-not-at-top
  from serving import batch_score
  from serving import score_job
  from serving import model_repository
  models = [model_repository.resolve_model_dir(m) for m in args.model]
  print(f"scoring {args.collection or 'all collections'} ({args.split}) "
        f"from {args.data} (Beam RunInference)", flush=True)
  summary = score_job.run(models, args.data, args.out, args.collection,
                          args.split, args.beam_args,
                          batch_score.ScoreOptions(
                              k=args.k, default_config=common.guard_config(args)))
  print(f"{summary['rows']} rows -> {args.out}; {summary['dead_letters']} "
        f"dead letters of {summary['graphs']} graphs")
  for c, m in summary["metrics"].items():
    shown = ", ".join(f"{k} {v:.4f}" for k, v in m.items() if k != "graphs")
    print(f"{c}: {shown} ({m.get('graphs')} graphs with runtimes)")
  if not summary["reconciled"]:
    print("tpurank: error: rows + dead letters != graphs", file=console.err())
    return 1
  if summary["dead_letters"]:
    with open(args.out + ".dead_letters.jsonl") as f:
      for line in list(f)[:10]:
        print(f"tpurank: dead letter: {json.loads(line)['reason']}",
              file=console.err())
    print(f"tpurank: all reasons in {args.out}.dead_letters.jsonl",
          file=console.err())
    if not args.allow_dead_letters:
      return 2
  print(json.dumps({"out": args.out, "rows": summary["rows"],
                    "dead_letters": summary["dead_letters"]}))
  return 0
