"""`tpurank featurize`: raw TPU tuning protos -> TpuGraphs .npz files."""

import json


def add_parser(sub):
  p = sub.add_parser(
      "featurize", help="turn raw tuning protos (TuningData / "
      "ModuleTuningData) into TpuGraphs .npz files",
      description="Reads ModuleTuningData (a program with layout runs) or "
      "TuningData (kernels with tile runs) and writes one .npz per graph "
      "in the official TpuGraphs layout (140 node features, opcode ids, "
      "edges, config features, runtimes; failed runs dropped), each "
      "validated. Kernels the official pipeline leaves out (one run, or a "
      "run without a tile config) are listed as skipped. See featurize/ for the node order and the features.")
  p.add_argument("raw", nargs="+", help="raw .pb tuning files")
  p.add_argument("--out", required=True, help="output directory")


def run(args) -> int:
  # Loaded when the command runs, not at start-up: keeps the CLI fast.
  # pylint: disable=g-import-not-at-top
  from featurize import tuning
  from schemas import npz_format
  written, skipped = 0, 0
  for path in args.raw:
    result = tuning.featurize(path, args.out)
    for npz in result.files:
      g = npz_format.load_graph(npz)
      written += 1
      print(f"{npz}: {g.kind}, {g.num_nodes} nodes, {g.num_configs} configs",
            flush=True)
    for problem in result.skipped:
      skipped += 1
      print(f"skipped: {problem.path}: {problem.field}: {problem.found}",
            flush=True)
  print(json.dumps({"written": written, "skipped": skipped}))
  return 0
