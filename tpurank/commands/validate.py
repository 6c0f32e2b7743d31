"""`tpurank validate PATH...`: checks npz files or trees, reports every problem."""

import os

from schemas import npz_format
from tpurank import console


def add_parser(sub):
  p = sub.add_parser(
      "validate", help="check TpuGraphs .npz files or directory trees",
      description="Checks every .npz under the given files or directories "
      "against the TpuGraphs format and prints every problem, one per line. "
      "Exit code 0 if all are valid, 2 otherwise.")
  p.add_argument("paths", nargs="+", metavar="PATH")
  p.add_argument("--kind", choices=(npz_format.TILE, npz_format.LAYOUT),
                 help="graph kind (default: from the path, else the keys)")
  p.add_argument("--quiet", action="store_true",
                 help="print only problems and the summary")


def run(args) -> int:
  missing = [p for p in args.paths if not os.path.exists(p)]
  for path in missing:
    print(f"{path}: file: expected an existing file or directory, found "
          "nothing", file=console.err())
  checked = invalid = problems = 0
  for path in npz_format.find_npz(p for p in args.paths if p not in missing):
    found = npz_format.validate_file(path, args.kind)
    checked += 1
    for problem in found:
      print(problem, file=console.err())
    if found:
      invalid += 1
      problems += len(found)
    elif not args.quiet:
      print(f"{path}: ok")
  if checked == 0 and not missing:
    print("tpurank: error: no .npz files under " + " ".join(args.paths),
          file=console.err())
    return 2
  print(f"checked {checked} files: {checked - invalid} valid, {invalid} "
        f"with {problems} problems" +
        (f"; {len(missing)} paths not found" if missing else ""))
  return 2 if invalid or missing else 0
