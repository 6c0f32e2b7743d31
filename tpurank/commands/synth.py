"""`tpurank synth`: writes SIMULATED TpuGraphs collections (see simulator/)."""

import os
import re
import time

from schemas import npz_format
from simulator import hardware

ALL = "all"
NOTICE = ("Runtimes in these files are SIMULATED by tpurank's analytical "
          "TPU-like cost model (simulator/); they are not TPU measurements "
          "and results on them are not TpuGraphs results.")


def add_parser(sub):
  p = sub.add_parser(
      "synth", help="write simulated collections in the TpuGraphs npz format",
      description="Writes HLO-like graphs with SIMULATED runtimes, in the "
      "official directory layout (npz/tile/xla/{train,valid,test}/, "
      "npz/layout/{xla,nlp}/{default,random}/{train,valid,test}/). " + NOTICE)
  p.add_argument("--collection", required=True,
                 choices=npz_format.COLLECTIONS + (ALL,))
  p.add_argument("--out", required=True, help="root directory to write")
  p.add_argument("--graphs", type=int, default=None,
                 help="graphs per collection, split 80/10/10 (default: by "
                 "scale: tiny 12 tile / 6 layout, small 300 / 40, full as "
                 "the real dataset)")
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--scale", choices=("tiny", "small", "full"), default="small")
  p.add_argument("--chip", choices=list(hardware.CHIPS),
                 default=hardware.DEFAULT_CHIP,
                 help="simulated chip whose cost model prices the runtimes "
                 "(README \"Chip variants\"); one --out holds one chip's "
                 "collections (default: %(default)s)")
  p.add_argument("--quiet", action="store_true", help="no progress bars")


def _chip_of(out: str):
  """The chip an earlier `tpurank synth` wrote `out` with, None if new."""
  path = os.path.join(out, "SIMULATED.md")
  if not os.path.exists(path):
    return None
  with open(path) as f:
    found = re.search(r"--chip (\S+?)`", f.read())
  # Files from before chip variants existed were priced on the default.
  return found.group(1) if found else hardware.DEFAULT_CHIP


def run(args) -> int:
  # Loaded when the command runs, not at start-up: keeps the CLI fast.
  from simulator import synth  # pylint: disable=g-import-not-at-top
  if args.graphs is not None and args.graphs < 3:
    print("tpurank: error: --graphs: expected at least 3 (one per split), "
          f"found {args.graphs}")
    return 2
  earlier = _chip_of(args.out)
  if earlier not in (None, args.chip):
    print(f"tpurank: error: --chip: {args.out} holds collections priced on "
          f"chip {earlier!r}, not {args.chip!r}; write each chip to its own "
          "--out")
    return 2
  collections = (npz_format.COLLECTIONS if args.collection == ALL
                 else (args.collection,))
  os.makedirs(args.out, exist_ok=True)
  with open(os.path.join(args.out, "SIMULATED.md"), "w") as f:
    f.write(f"# Simulated data\n\n{NOTICE}\n\nWritten by `tpurank synth "
            f"--scale {args.scale} --seed {args.seed} --chip {args.chip}`.\n")
  print(f"note: {NOTICE}")
  header = (f"{'collection':20} {'graphs':>7} {'nodes':>10} {'configs':>10} "
            f"{'MB':>9} {'s':>7} {'graphs/s':>9} {'MB/s':>7}")
  rows = []
  for collection in collections:
    start = time.perf_counter()
    stats = synth.synth_collection(collection, args.out, args.graphs,
                                   args.seed, args.scale,
                                   progress=not args.quiet, chip=args.chip)
    secs = time.perf_counter() - start
    mb = stats["bytes"] / 1e6
    rows.append(f"{collection:20} {stats['graphs']:7d} {stats['nodes']:10d} "
                f"{stats['configs']:10d} {mb:9.2f} {secs:7.2f} "
                f"{stats['graphs'] / secs:9.2f} {mb / secs:7.2f}")
  print(header)
  print("\n".join(rows))
  print(f"wrote {os.path.join(args.out, 'npz')}")
  return 0
