"""Runs a compiled Vertex AI PipelineSpec on this machine, as Vertex would.

A rehearsal of what Vertex AI Pipelines does with the JSON that
`tpurank pipeline compile --target vertex` writes, so the spec's commands,
executor class paths, arguments and artifact passing are proven before a
cloud run:

* tasks run in the DAG's order (`dependentTasks`);
* each container task runs its `command` + `args` from the spec (with this
  machine's Python in place of the image's `python`), with `{{$}}` replaced
  by the ExecutorInput JSON a Vertex launcher passes: the spec's parameter
  values, input artifacts as the producing tasks' ExecutorOutput reported
  them, output artifacts under `root/<task>/`, each named as Vertex names
  artifacts (so TFX's entrypoint maps ids to names as on Vertex);
* a `lifecycle.preCacheCheck` (ExampleGen's driver) runs first and writes
  the output file the executor then reads, as on Vertex.

What a local run cannot be, and is replaced (`Rehearsal.replaced` lists
each, with why):

* the container image: the command runs in this environment (docker may
  be missing here; the image holds the same lock and code);
* a resolver task's metadata query: answered with no artifacts (a first
  run: no blessed model yet; the rehearsal keeps no metadata store);
* an executor that calls a Google Cloud API (the Vertex Trainer submits a
  CustomJob): `substitutions` maps its class path to the local one that
  the job's own container would run (the same run_fn and arguments).
"""

import dataclasses
import json
import os
import subprocess
import sys
from typing import Mapping, Optional

# The Vertex Trainer's executor submits a CustomJob whose container runs
# TFX's GenericExecutor with the same invocation: run that one here.
VERTEX_TRAINER = ("tfx.extensions.google_cloud_ai_platform.trainer.executor."
                  "GenericExecutor")
LOCAL_TRAINER = "tfx.components.trainer.executor.GenericExecutor"
SUBSTITUTIONS = {VERTEX_TRAINER: LOCAL_TRAINER}
_ARTIFACT_NAME = "projects/rehearsal/locations/local/metadataStores/default/"\
                 "artifacts/{}"


class RehearsalError(RuntimeError):
  """A task of the spec failed (the message names it and ends its log)."""


@dataclasses.dataclass
class Rehearsal:
  """What a rehearsal ran and produced."""
  order: list = dataclasses.field(default_factory=list)  # Task names run.
  # {task: {output key: [RuntimeArtifact JSON]}} as the executors reported.
  outputs: dict = dataclasses.field(default_factory=dict)
  replaced: list = dataclasses.field(default_factory=list)  # What and why.
  logs: dict = dataclasses.field(default_factory=dict)  # {task: log path}.


def topological_order(tasks: Mapping[str, dict]) -> list[str]:
  """Task names, each after its `dependentTasks` (ties by name)."""
  done, order = set(), []
  while len(order) < len(tasks):
    ready = sorted(t for t, spec in tasks.items() if t not in done and
                   set(spec.get("dependentTasks", [])) <= done)
    if not ready:
      raise ValueError(f"the DAG has a cycle among {sorted(set(tasks) - done)}")
    order += ready
    done.update(ready)
  return order


def _parameters(task: dict) -> dict:
  """ExecutorInput parameters of a task: ({legacy}, {values})."""
  legacy, values = {}, {}
  for name, p in task.get("inputs", {}).get("parameters", {}).items():
    runtime = p.get("runtimeValue", {})
    if "constantValue" in runtime:
      legacy[name] = runtime["constantValue"]
    elif "constant" in runtime:
      values[name] = runtime["constant"]
  return legacy, values


def _output_schema(component: dict, key: str) -> dict:
  return component["outputDefinitions"]["artifacts"][key]["artifactType"]


def run(spec_path: str, root: str,
        substitutions: Optional[Mapping[str, str]] = None,
        env: Optional[Mapping[str, str]] = None) -> Rehearsal:
  """Rehearses the compiled pipeline JSON at `spec_path` under `root`.

  Args:
    spec_path: What `tpurank pipeline compile --target vertex` wrote.
    root: Local directory standing in for the pipeline root on GCS.
    substitutions: {executor class path in the spec: class path to run}
      (default SUBSTITUTIONS).
    env: Extra environment of every task.

  Raises:
    RehearsalError: a task exited non-zero.
  """
  substitutions = SUBSTITUTIONS if substitutions is None else substitutions
  with open(spec_path) as f:
    spec = json.load(f)["pipelineSpec"]
  tasks = spec["root"]["dag"]["tasks"]
  executors = spec["deploymentSpec"]["executors"]
  out = Rehearsal()
  serial = 0
  for name in topological_order(tasks):
    task = tasks[name]
    component = spec["components"][task["componentRef"]["name"]]
    executor = executors[component["executorLabel"]]
    if "resolver" in executor:
      # Vertex queries its metadata store; here: what this run made before
      # (a first run has no blessed model, so none).
      out.outputs[name] = {key: [] for key in
                           executor["resolver"]["outputArtifactQueries"]}
      out.replaced.append(f"{name}: resolver query answered locally (no "
                          "earlier run: no artifacts)")
      out.order.append(name)
      continue
    task_dir = os.path.join(root, name)
    os.makedirs(task_dir, exist_ok=True)
    inputs = {}
    for key, ref in task.get("inputs", {}).get("artifacts", {}).items():
      if "taskOutputArtifact" not in ref:  # Not in what tpurank compiles.
        raise ValueError(f"{name}: input {key}: only taskOutputArtifact "
                         f"inputs are rehearsed, found {sorted(ref)}")
      source = ref["taskOutputArtifact"]
      inputs[key] = {"artifacts": out.outputs[source["producerTask"]][
          source["outputArtifactKey"]]}
    outputs = {}
    for key in component.get("outputDefinitions", {}).get("artifacts", {}):
      serial += 1
      outputs[key] = {"artifacts": [{
          "name": _ARTIFACT_NAME.format(serial),
          "type": _output_schema(component, key),
          "uri": os.path.join(task_dir, key), "metadata": {}}]}
    legacy, values = _parameters(task)
    output_file = os.path.join(task_dir, "executor_output.json")
    executor_input = json.dumps({
        "inputs": {"parameters": legacy, "parameterValues": values,
                   "artifacts": inputs},
        "outputs": {"artifacts": outputs, "outputFile": output_file}})
    container = executor["container"]
    steps = []
    pre = container.get("lifecycle", {}).get("preCacheCheck")
    if pre:
      steps.append(("driver", pre["command"], pre["args"]))
    steps.append(("executor", container["command"], container["args"]))
    log_path = os.path.join(task_dir, "log.txt")
    out.logs[name] = log_path
    for step, command, args in steps:
      args = [executor_input if a == "{{$}}" else a for a in args]
      for i, a in enumerate(args[:-1]):
        if a == "--executor_class_path" and args[i + 1] in substitutions:
          out.replaced.append(f"{name}: executor {args[i + 1]} run as "
                              f"{substitutions[args[i + 1]]} (it calls a "
                              "Google Cloud API)")
          args[i + 1] = substitutions[args[i + 1]]
      command = [sys.executable if c == "python" else c for c in command]
      with open(log_path, "a") as log:
        log.write(f"== {step}: {' '.join(command)} ...\n")
        log.flush()
        proc = subprocess.run(command + args, stdout=log,
                              stderr=subprocess.STDOUT, check=False,
                              env=dict(os.environ, **(env or {})))
      if proc.returncode:
        with open(log_path) as log:
          tail = log.read()[-3000:]
        raise RehearsalError(f"{name} ({step}) exited {proc.returncode}; "
                             f"log {log_path}:\n{tail}")
    with open(output_file) as f:
      reported = json.load(f).get("artifacts", {})
    # What the executor reported (uri, metadata), typed as the spec says.
    out.outputs[name] = {
        key: [dict(value["artifacts"][0], **a) for a in reported.get(
            key, value)["artifacts"]] for key, value in outputs.items()}
    out.order.append(name)
  return out
