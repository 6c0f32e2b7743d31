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
      "validated. See featurize/ for the node order and the features.")
  p.add_argument("raw", nargs="+", help="raw .pb tuning files")
  p.add_argument("--out", required=True, help="output directory")


def run(args) -> int:
  # pylint: disable=g-import-not-at-top
  from featurize import tuning
  from schemas import npz_format
  written = []
  for path in args.raw:
    for npz in tuning.featurize(path, args.out):
      g = npz_format.load_graph(npz)
      written.append({"file": npz, "kind": g.kind, "nodes": g.num_nodes,
                      "configs": g.num_configs})
      print(f"{npz}: {g.kind}, {g.num_nodes} nodes, {g.num_configs} configs",
            flush=True)
  print(json.dumps({"written": len(written)}))
  return 0
