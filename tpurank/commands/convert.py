"""`tpurank convert`: a collection directory -> GraphTensor TFRecords (Beam)."""

import json

from conversion import options
from schemas import npz_format
from tpurank import console
from tpurank.commands import common

# Unknown flags are Beam pipeline options (--runner, --project, ...).
ACCEPTS_BEAM_ARGS = True


def add_parser(sub):
  p = sub.add_parser(
      "convert", help="convert a collection to GraphTensor TFRecords (Beam)",
      description="Reads DATA/npz/<collection>/{train,valid,test}/*.npz and "
      "writes OUT/<split>/examples-*.tfrecord.gz (what `tpurank train` and "
      "the TFX Trainer read), OUT/dead_letters/<split>.jsonl (files that "
      "could not be converted, with the reason) and OUT/conversion.json "
      "(counts). Any further flags are Beam pipeline options, e.g. "
      "--runner DataflowRunner --project P --region R --temp_location "
      "gs://B/tmp; the default runner is the DirectRunner over all cores.")
  p.add_argument("--data", required=True,
                 help="directory holding npz/... (as `tpurank synth` writes)")
  p.add_argument("--collection", required=True, choices=npz_format.COLLECTIONS)
  p.add_argument("--out", required=True, help="output directory")
  p.add_argument("--splits", nargs="+", choices=("train", "valid", "test"),
                 help="only these splits (default: all present)")
  common.add_conversion_flags(p, eval_k=True)
  p.add_argument("--overwrite", action="store_true",
                 help="clear a non-empty --out first (without it, a non-empty "
                 "--out is refused: outputs never mix runs)")
  p.add_argument("--allow-dead-letters", action="store_true",
                 help="exit 0 even if some files went to dead letters "
                 "(default: exit 2 after writing everything else)")


def run(args) -> int:
  # Loaded when the command runs, not at start-up: keeps the CLI fast.
  from conversion import convert_job  # pylint: disable=g-import-not-at-top
  kind = npz_format.collection_kind(args.collection)
  convert_options = options.ConvertOptions(
      k=args.k, eval_k=args.eval_k, hops=args.hops, seed=args.seed,
      max_examples=options.max_examples(kind, args.max_examples))
  print(f"converting {args.collection} from {args.data} to {args.out} "
        "(Beam)", flush=True)
  summary = convert_job.run(args.data, args.collection, args.out,
                            convert_options, args.beam_args, args.splits,
                            overwrite=args.overwrite)
  for split, c in summary["splits"].items():
    print(f"{split}: {c['graphs_in']} graphs in, {c['graphs_converted']} "
          f"converted, {c['dead_letters']} dead letters, {c['examples']} "
          f"examples, {c['configs']} configs ({c['configs_merged']} "
          "duplicates merged)")
  if summary["mismatches"]:
    print("tpurank: error: counts do not reconcile: " +
          "; ".join(summary["mismatches"]), file=console.err())
    return 1
  dead = convert_job.read_dead_letters(args.out)
  for record in dead[:10]:
    print(f"tpurank: dead letter: {record['reason']}", file=console.err())
  if dead:
    print(f"tpurank: {len(dead)} file(s) not converted; all reasons in "
          f"{args.out}/dead_letters/ (fix or remove them and re-run"
          f"{'' if args.allow_dead_letters else ', or pass --allow-dead-letters'})",
          file=console.err())
    if not args.allow_dead_letters:
      return 2
  print(json.dumps({"out": args.out, "splits": summary["splits"]}))
  return 0
