"""The benchmark suite: every benchmark, then one report with plots.

Usage:
  python -m benchmarks.suite [--quick] [--out DIR] [--summary FILE]

`make bench` runs the full suite (about 77 minutes on 2 cores, measured) and writes
BENCHMARKS.md at the top of the repository, the per-benchmark reports and
PNG plots under benchmarks/results/suite/; `make bench-quick` runs a reduced
suite (about 9 minutes measured before the dask, realism, real and multi_worker parts; longer now, not re-measured) into bench_out/quick/. Each benchmark runs as its
own process, one after the other (they would distort each other's timings
on 2 cores). All data is SIMULATED (`tpurank synth`): nothing here is a
TpuGraphs result.
"""

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time

from benchmarks import plots
from benchmarks import report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name -> (module, full args, quick args). Quality trains 2 models x 3 seeds
# per collection within a stated budget; the rest measure speed and memory.
SUITE = {
    "quality": ("benchmarks.bench_quality",
                ["--minutes", "0.4", "--seeds", "0", "1", "2"],
                # Quick: one seed, one collection (a smoke run, not a
                # result: the spread needs the full suite's 3 seeds).
                ["--minutes", "0.1", "--seeds", "0",
                 "--collections", "layout:nlp:random"]),
    "convert": ("benchmarks.bench_convert", [],
                ["--collections", "layout:nlp:random"]),
    # DirectRunner vs Dask with 1 and 2 workers (local clusters).
    "dask": ("benchmarks.bench_dask", [],
             ["--collections", "layout:nlp:random", "--nodes", "2000",
              "--configs", "2000"]),
    "serving": ("benchmarks.bench_serving",
                ["--clients", "1", "4", "--seconds", "5", "--min-rankings",
                 "100"],
                ["--nodes", "1000", "--configs", "200", "--clients", "1",
                 "4", "--seconds", "2", "--min-rankings", "10"]),
    "join": ("benchmarks.bench_join", [],
             ["--nodes", "2000", "--configs", "200", "--big-nodes", "500",
              "--big-configs", "5000", "--train-nodes", "2000"]),
    # The default GNN on collections priced by each simulated chip, within
    # the trainer's 10-minute budget (about 12 minutes per chip).
    "chips": ("benchmarks.bench_chips", ["--minutes", "10"],
              ["--minutes", "0.1", "--chips", "default"]),
    "realism": ("benchmarks.bench_realism", [], []),
    "real": ("benchmarks.bench_real", [], ["--train-minutes", "0.5"]),
    "scaling": ("benchmarks.bench_scaling",
                ["--nodes", "1000", "20000", "44000", "--configs",
                 "1000", "10000", "100000"],
                ["--nodes", "500", "1500", "--configs", "2000",
                 "--fixed-configs", "500", "--fixed-nodes", "500"]),
    "multi_worker": ("benchmarks.bench_multi_worker", [],
                     ["--graphs", "4", "--epochs", "2", "--steps-per-epoch",
                      "3"]),
}


def run_benchmark(name: str, out: str, quick: bool) -> dict:
  """Runs one benchmark into `out`; returns how long it took."""
  module, full_args, quick_args = SUITE[name]
  args = quick_args if quick else full_args
  path = os.path.join(out, f"{name}.md")
  extra = ["--report", path]
  if name == "quality":
    extra += ["--data", os.path.join(ROOT, "bench_out",
                                     "quick" if quick else "suite",
                                     "quality", "data")]
  cmd = [sys.executable, "-m", module, *args, *extra]
  print(f"== {name}: {' '.join(cmd[1:])}", flush=True)
  start = time.time()
  log = os.path.join(out, f"{name}.log")
  with open(log, "w") as f:
    proc = subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT,
                          check=False)
  seconds = time.time() - start
  status = "ok" if proc.returncode == 0 else f"FAILED ({proc.returncode})"
  print(f"   {status} in {seconds / 60:.1f} min (log: {log})", flush=True)
  return {"name": name, "command": "python -m " + " ".join(
      [module, *args]), "seconds": seconds, "ok": proc.returncode == 0,
          "log": log}


def _load(out: str, name: str):
  path = os.path.join(out, f"{name}.json")
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f)


def speed_ratios(out: str) -> list[str]:
  """The summary table: each speed beside the bound it is measured
  against, from the benchmarks' JSON results."""
  rows = []
  convert = _load(out, "convert")
  if convert:
    load = sum(r["load_s"] for r in convert["rows"])
    conv = sum(r["convert_s"] for r in convert["rows"])
    configs = sum(r["configs"] for r in convert["rows"])
    rows.append(("conversion (Beam, small collections, incl. start-up)",
                 f"{conv:.1f} s ({configs / conv:.0f} configs/s)",
                 f"np.load of the same files: {load:.2f} s",
                 f"{conv / load:.0f}x slower"))
  dask = _load(out, "dask")
  if dask:
    secs = {}
    for r in dask["rows"]:
      key = "direct" if r["runner"] == "direct" else r["workers"]
      secs[key] = secs.get(key, 0) + r["seconds"]
    if 1 in secs and 2 in secs:
      rows.append(("conversion on Beam's DaskRunner, 2 workers on this "
                   "machine (small collections + one layout graph)",
                   f"{secs[2]:.1f} s", f"1 worker: {secs[1]:.1f} s; "
                   f"DirectRunner: {secs['direct']:.1f} s",
                   f"{secs[1] / secs[2]:.2f}x of 1 worker"))
  scaling = _load(out, "scaling")
  if scaling:
    p = max(scaling["by_nodes"], key=lambda q: q["nodes"])
    c = p["convert"]
    rows.append((f"conversion of one graph ({p['nodes']} nodes, "
                 f"{p['configs']} configs, every config)",
                 f"{c['seconds']:.2f} s", f"np.load: "
                 f"{c['np_load_seconds']:.2f} s",
                 f"{c['seconds'] / c['np_load_seconds']:.0f}x slower"))
    for q in (min(scaling["by_nodes"], key=lambda q: q["nodes"]), p):
      t = q["train"]
      rows.append((f"training examples/s ({q['nodes']}-node graph, batch "
                   "4 x K=16, XLA)", f"{t['examples_per_second']:.1f}",
                   f"input pipeline alone: "
                   f"{t['input_examples_per_second']:.1f}",
                   f"{t['examples_per_second'] / t['input_examples_per_second']:.2f}"
                   " of the bound"))
  quality = _load(out, "quality")
  if quality:
    for c, r in quality["results"].items():
      eps = [run.get("examples_per_second") for run in r["runs"]["GNN"]]
      eps = [e for e in eps if e]
      if eps:
        rows.append((f"training examples/s, {c} (GNN, small collection)",
                     f"{sum(eps) / len(eps):.1f}", "-", "-"))
  serving = _load(out, "serving")
  if serving:
    n = serving["configs"]
    one = {r["path"]: r for r in serving["rows"] if r["clients"] == 1}
    base = one.get("in-process SavedModel")
    for name, r in one.items():
      rows.append((f"scoring, {name}, 1 client ({serving['graph']})",
                   f"{r['rankings_per_s'] * n:.0f} configs/s; ranking p50 "
                   f"{r['p50_ms'] / 1000:.2f} s",
                   "in-process SavedModel" if base and r is not base
                   else "(the bound)",
                   f"{r['rankings_per_s'] / base['rankings_per_s']:.2f} of "
                   "the bound" if base and r is not base else "1"))
    b = serving.get("batch")
    if b and base:
      rows.append(("scoring, batch (`tpurank score`, Beam RunInference, "
                   "small collection incl. start-up)",
                   f"{b['configs_per_s']:.0f} configs/s",
                   "in-process SavedModel (on the serving benchmark's graph)",
                   "-"))
  multi = _load(out, "multi_worker")
  if multi and len(multi["rows"]) == 2:
    one, two = (r["examples_per_second"] for r in multi["rows"])
    rows.append(("training examples/s, 2 workers on this machine "
                 "(MultiWorkerMirroredStrategy, loopback)", f"{two:.1f}",
                 f"1 worker: {one:.1f}", f"{two / one:.2f}"))
  lines = ["| measure | value | bound | ratio |", "|---|---|---|---|"]
  lines += [f"| {' | '.join(r)} |" for r in rows]
  return lines


def _embed(out: str, name: str, summary_dir: str) -> list[str]:
  """A benchmark's report, one heading level down, its images re-pointed
  relative to the summary file."""
  path = os.path.join(out, f"{name}.md")
  if not os.path.exists(path):
    return [f"({name}: no report; see its log)", ""]
  rel = os.path.relpath(out, summary_dir)
  text = open(path).read()
  text = re.sub(r"^(#+) ", r"#\1 ", text, flags=re.M)
  text = re.sub(r"\]\(([^/)]+\.png)\)", lambda m: f"]({rel}/{m[1]})", text)
  return text.splitlines() + [""]


# Runs too long for the suite's hour, linked under their benchmark's
# report: what they are, and their reports under benchmarks/results/.
LONG_RUNS = {
    "quality": ("The same comparison at the trainer's default budget (10 "
                "minutes per model; the first also beside the official "
                "TpuGraphs baseline, run outside this project)",
                ["quality.md", "quality_layout_late.md",
                 "quality_nlp_default_joins.md"]),
    "chips": ("The same chips with 3 training seeds each",
              ["chips.md", "chips_wide.md"]),
}


def _long_runs(name: str, summary_dir: str) -> list[str]:
  """The line linking a benchmark's long runs (those that exist)."""
  if name not in LONG_RUNS:
    return []
  what, reports = LONG_RUNS[name]
  paths = [os.path.join(ROOT, "benchmarks", "results", r) for r in reports]
  links = [os.path.relpath(p, summary_dir) for p in paths
           if os.path.exists(p)]
  if not links:
    return []
  return [what + ": " + ", ".join(f"[{l}]({l})" for l in links) + ".", ""]


def write_summary(out: str, summary_path: str, runs: list, quick: bool):
  """BENCHMARKS.md: what ran, the speed ratios, every report and plot."""
  quality = _load(out, "quality")
  if quality:
    plots.quality_plot(quality["results"], os.path.join(out, "quality.png"))
  serving = _load(out, "serving")
  if serving:
    plots.serving_plot(serving["rows"], os.path.join(out, "serving.png"))
  summary_dir = os.path.dirname(os.path.abspath(summary_path))
  rel = os.path.relpath(out, summary_dir)
  total = sum(r["seconds"] for r in runs)
  lines = [
      "# tpurank benchmarks" + (" (quick)" if quick else ""), "",
      "All data is SIMULATED by `tpurank synth` (runtimes from tpurank's "
      "analytical cost model, README): no figure here is a TpuGraphs "
      "result.", "",
      f"Command: `make {'bench-quick' if quick else 'bench'}` "
      f"(`python -m benchmarks.suite{' --quick' if quick else ''}`)  ",
      f"Date: {time.strftime('%Y-%m-%d %H:%M')}; machine: "
      f"{os.cpu_count()} CPU cores, {platform.machine()}, Python "
      f"{platform.python_version()}, no accelerator; total "
      f"{total / 60:.1f} min. Each benchmark ran alone, one after the other.",
      "", "| benchmark | command | minutes | status |", "|---|---|---|---|"]
  for r in runs:
    lines.append(f"| {r['name']} | `{r['command']}` | "
                 f"{r['seconds'] / 60:.1f} | "
                 f"{'ok' if r['ok'] else 'FAILED: see ' + r['log']} |")
  lines += ["", "## Speed, each against its bound", ""] + speed_ratios(out)
  lines += [""]
  for name in SUITE:  # Each report brings its own heading.
    lines += _embed(out, name, summary_dir)
    if name == "quality" and quality:
      lines += [f"![quality]({rel}/quality.png)", ""]
    lines += _long_runs(name, summary_dir)
    if name == "serving" and serving:
      lines += [f"![serving latency]({rel}/serving.png)", ""]
  report.write_report(summary_path, lines)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true",
                      help="the reduced suite (about 9 minutes measured before the dask, realism, real and multi_worker parts; longer now, not re-measured)")
  parser.add_argument("--out", default=None,
                      help="reports and plots (default benchmarks/results/suite, "
                      "quick: bench_out/quick)")
  parser.add_argument("--summary", default=None,
                      help="default BENCHMARKS.md (quick: OUT/BENCHMARKS.md)")
  parser.add_argument("--only", nargs="+", choices=list(SUITE),
                      help="run only these (the summary reads the others' "
                      "last results)")
  args = parser.parse_args()
  out = args.out or os.path.join(
      ROOT, "bench_out/quick" if args.quick else "benchmarks/results/suite")
  summary = args.summary or (os.path.join(out, "BENCHMARKS.md") if args.quick
                             else os.path.join(ROOT, "BENCHMARKS.md"))
  os.makedirs(out, exist_ok=True)
  # What ran last time, so that --only keeps the others in the summary.
  runs_file = os.path.join(out, "runs.json")
  previous = {}
  if args.only and os.path.exists(runs_file):
    with open(runs_file) as f:
      previous = {r["name"]: r for r in json.load(f)}
  ran = {name: run_benchmark(name, out, args.quick)
         for name in (args.only or SUITE)}
  runs = [ran.get(name) or previous[name] for name in SUITE
          if name in ran or name in previous]
  with open(runs_file, "w") as f:
    json.dump(runs, f, indent=1)
  write_summary(out, summary, runs, args.quick)
  return 0 if all(r["ok"] for r in ran.values()) else 1


if __name__ == "__main__":
  sys.exit(main())
