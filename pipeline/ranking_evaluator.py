"""TFX component: ranking metrics of the trained model, and its blessing.

TFMA's Evaluator slices per example; the metrics that matter here are per
graph over all of its configs (Kendall tau, ordered-pair accuracy, top-K
slowdown error), which span many examples. This component scores every
config of the evaluation split with the exported SavedModel (as TF Serving
would), computes them with `trainer.metrics`, and blesses the model only
when its primary metric (layout: Kendall tau, tile: top-5 error) clears the
threshold and is no worse than the last blessed model's on the same data.
The blessing carries the custom properties the Pusher and TFX's
LatestBlessedModelStrategy read (`blessed`, `current_model_id`).
"""

import json
import os

from tfx import v1 as tfx
from tfx.utils import io_utils
from tfx.utils import path_utils

from schemas import npz_format
from serving import saved_model_scorer
from trainer import evaluate
from trainer import metrics

BLESSED_FILE, NOT_BLESSED_FILE = "BLESSED", "NOT_BLESSED"
METRICS_FILE = "metrics.json"


def record_files(examples_uri: str, split: str) -> list[str]:
  """The record files of one split of an Examples artifact."""
  folder = os.path.join(examples_uri, f"Split-{split}")
  files = sorted(tfx.dsl.io.fileio.glob(os.path.join(folder, "*")))
  if not files:
    raise ValueError(f"{folder}: no records of split {split!r}")
  return files


def score_model(model_uri: str, kind: str, files: list[str]) -> dict:
  """{"metrics": collection means, "per_graph": {...}} of one Model."""
  scorer = saved_model_scorer.SavedModelScorer(
      path_utils.serving_model_path(model_uri))
  means, per_graph = evaluate.metrics_of(kind,
                                         scorer.score_records(kind, files))
  return {"metrics": means, "per_graph": per_graph}


def decide(kind: str, candidate: dict, baseline: dict | None,
           threshold: float) -> tuple[bool, str]:
  """Whether to bless the candidate, and why (one line)."""
  name, mode = metrics.PRIMARY[kind]
  value = candidate.get(name)
  if value is None:
    return False, f"no {name}: the split has no graphs with runtimes"
  better = (lambda a, b: a >= b) if mode == "max" else (lambda a, b: a <= b)
  if not better(value, threshold):
    return False, f"{name} {value:.4f} does not clear the threshold " \
                  f"{threshold:g}"
  if baseline is not None and baseline.get(name) is not None:
    if not better(value, baseline[name]):
      return False, f"{name} {value:.4f} is worse than the last blessed " \
                    f"model's {baseline[name]:.4f}"
    return True, f"{name} {value:.4f} clears {threshold:g} and the last " \
                 f"blessed model's {baseline[name]:.4f}"
  return True, f"{name} {value:.4f} clears {threshold:g} (no blessed model " \
               "yet)"


@tfx.dsl.components.component
def RankingEvaluator(  # pylint: disable=invalid-name
    examples: tfx.dsl.components.InputArtifact[
        tfx.types.standard_artifacts.Examples],
    model: tfx.dsl.components.InputArtifact[
        tfx.types.standard_artifacts.Model],
    evaluation: tfx.dsl.components.OutputArtifact[
        tfx.types.standard_artifacts.ModelEvaluation],
    blessing: tfx.dsl.components.OutputArtifact[
        tfx.types.standard_artifacts.ModelBlessing],
    collection: tfx.dsl.components.Parameter[str],
    threshold: tfx.dsl.components.Parameter[float],
    split: tfx.dsl.components.Parameter[str] = "valid",
    baseline_model: tfx.dsl.components.InputArtifact[
        tfx.types.standard_artifacts.Model] = None,
):
  """Scores all configs of the split; blesses the model or not.

  Args:
    examples: The ExampleGen output (its `split` is scored).
    model: The Trainer's model.
    evaluation: Gets metrics.json (candidate and baseline, per graph).
    blessing: Gets BLESSED or NOT_BLESSED and the `blessed` property.
    collection: e.g. "layout:xla:random" (picks the metrics).
    threshold: Least Kendall tau (layout) / most top-5 error (tile).
    split: The split to evaluate on.
    baseline_model: The last blessed model, if any.
  """
  kind = npz_format.collection_kind(collection)
  files = record_files(examples.uri, split)
  candidate = score_model(model.uri, kind, files)
  baseline = (score_model(baseline_model.uri, kind, files)
              if baseline_model is not None else None)
  ok, reason = decide(kind, candidate["metrics"],
                      baseline and baseline["metrics"], threshold)
  report = {"collection": collection, "split": split, "blessed": ok,
            "reason": reason, "threshold": threshold,
            "candidate": candidate, "baseline": baseline}
  io_utils.write_string_file(os.path.join(evaluation.uri, METRICS_FILE),
                             json.dumps(report, indent=2, default=float))
  io_utils.write_string_file(
      os.path.join(blessing.uri, BLESSED_FILE if ok else NOT_BLESSED_FILE),
      reason)
  blessing.set_int_custom_property("blessed", int(ok))
  blessing.set_int_custom_property("current_model_id", model.id)
  blessing.set_string_custom_property("current_model", model.uri)
  blessing.set_string_custom_property("reason", reason)
  if baseline_model is not None:
    blessing.set_int_custom_property("baseline_model_id", baseline_model.id)
  print(f"RankingEvaluator: {'BLESSED' if ok else 'NOT BLESSED'}: {reason}",
        flush=True)
