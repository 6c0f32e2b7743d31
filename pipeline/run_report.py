"""What a finished local pipeline run produced, read back from MLMD.

Finds the newest evaluation, blessing and pushed model of a pipeline in
its MLMD store, and ranks one validation graph with the pushed model, for
the summary that `tpurank pipeline run` (and `make demo`) prints.
"""

import json
import os
from typing import Optional

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2
import numpy as np

from pipeline import ranking_evaluator
from schemas import npz_format
from serving import saved_model_scorer


def _newest(store, type_name: str):
  arts = store.get_artifacts_by_type(type_name)
  return max(arts, key=lambda a: a.id) if arts else None


def newest_states(store) -> dict:
  """{component id: state} of each component's newest execution.

  State names are MLMD's: COMPLETE (ran), CACHED (reused from TFX's cache),
  FAILED, ...
  """
  node_type = store.get_context_type("node").id
  newest = {}
  for e in store.get_executions():
    for c in store.get_contexts_by_execution(e.id):
      if c.type_id == node_type:
        name = c.name.split(".", 1)[-1]
        if name not in newest or e.id > newest[name].id:
          newest[name] = e
  return {n: metadata_store_pb2.Execution.State.Name(e.last_known_state)
          for n, e in newest.items()}


def summary(metadata_path: str) -> dict:
  """The newest run's evaluation report, blessing and pushed model."""
  store = metadata_store.MetadataStore(
      _sqlite(metadata_path))
  out = {"evaluation": None, "pushed_model": None, "executions":
         newest_states(store)}
  evaluation = _newest(store, "ModelEvaluation")
  if evaluation is not None:
    path = os.path.join(evaluation.uri, ranking_evaluator.METRICS_FILE)
    with open(path) as f:
      out["evaluation"] = json.load(f)
  pushed = _newest(store, "PushedModel")
  if pushed is not None and pushed.custom_properties["pushed"].int_value:
    out["pushed_model"] = pushed.custom_properties[
        "pushed_destination"].string_value
  return out


def _sqlite(path: str):
  config = metadata_store_pb2.ConnectionConfig()
  config.sqlite.filename_uri = path
  config.sqlite.connection_mode = 1  # READONLY
  return config


def top_configs(model_dir: str, npz_path: str, collection: str,
                top: int = 5, hops: Optional[int] = None) -> list[dict]:
  """The model's `top` configs of one graph beside their true runtimes."""
  graph = npz_format.load_graph(npz_path)
  scores = saved_model_scorer.SavedModelScorer(model_dir).score_graph(
      graph, npz_format.graph_id(collection, npz_path), hops)
  order = np.argsort(scores, kind="stable")
  runtime = graph.config_runtime.astype(np.float64)
  true_rank = np.argsort(np.argsort(runtime, kind="stable"), kind="stable")
  return [{"config": int(i), "score": float(scores[i]),
           "runtime": float(runtime[i]), "true_rank": int(true_rank[i]) + 1}
          for i in order[:top]]


def format_metrics(evaluation: Optional[dict]) -> list[str]:
  """A markdown table of the candidate's (and baseline's) metrics."""
  if not evaluation:
    return ["(no evaluation found)"]
  rows = [("candidate", evaluation["candidate"]["metrics"])]
  if evaluation.get("baseline"):
    rows.append(("last blessed", evaluation["baseline"]["metrics"]))
  names = [k for k in rows[0][1] if k != "graphs"]
  lines = ["| model | graphs | " + " | ".join(names) + " |",
           "|---|---|" + "---|" * len(names)]
  for label, m in rows:
    lines.append(f"| {label} | {m.get('graphs', '-')} | " + " | ".join(
        f"{m[n]:.4f}" if m.get(n) is not None else "-" for n in names) + " |")
  return lines
