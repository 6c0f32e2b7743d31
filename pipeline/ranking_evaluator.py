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

from tfx import types
from tfx import v1 as tfx
from tfx.components.evaluator import constants as evaluator_constants
from tfx.components.evaluator import executor as evaluator_executor
from tfx.dsl.components.base import base_component
from tfx.dsl.components.base import executor_spec
from tfx.types import artifact_utils
from tfx.types import component_spec
from tfx.types import standard_artifacts
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


class RankingEvaluatorSpec(types.ComponentSpec):
  """Inputs, outputs and parameters of `RankingEvaluator`."""
  PARAMETERS = {
      "collection": component_spec.ExecutionParameter(type=str),
      "threshold": component_spec.ExecutionParameter(type=float),
      "split": component_spec.ExecutionParameter(type=str, optional=True),
  }
  INPUTS = {
      "examples": component_spec.ChannelParameter(
          type=standard_artifacts.Examples),
      "model": component_spec.ChannelParameter(type=standard_artifacts.Model),
      "baseline_model": component_spec.ChannelParameter(
          type=standard_artifacts.Model, optional=True),
  }
  OUTPUTS = {
      "evaluation": component_spec.ChannelParameter(
          type=standard_artifacts.ModelEvaluation),
      "blessing": component_spec.ChannelParameter(
          type=standard_artifacts.ModelBlessing),
  }


class Executor(evaluator_executor.Executor):
  """Scores all configs of the split; blesses the model or not.

  A subclass of TFX's Evaluator executor for one reason: on Vertex AI,
  TFX's container entrypoint then rewrites the blessing's model ids
  (`current_model_id`, `baseline_model_id`) into Vertex artifact names,
  which the compiled LatestBlessedModel resolver's query matches; nothing
  of TFMA runs (`Do` is this class's own).
  """

  def Do(self, input_dict, output_dict, exec_properties):
    """Evaluates `model` (and `baseline_model`, if any) on the split.

    Args:
      input_dict: examples, model, baseline_model (optional).
      output_dict: evaluation (gets metrics.json: candidate and baseline,
        per graph), blessing (BLESSED or NOT_BLESSED, and the `blessed`
        property).
      exec_properties: collection, threshold (least Kendall tau for layout,
        most top-5 error for tile), split (default "valid").
    """
    examples = artifact_utils.get_single_instance(input_dict["examples"])
    model = artifact_utils.get_single_instance(input_dict["model"])
    baselines = input_dict.get("baseline_model") or []
    baseline_model = baselines[0] if baselines else None
    evaluation = artifact_utils.get_single_instance(output_dict["evaluation"])
    blessing = artifact_utils.get_single_instance(output_dict["blessing"])
    collection = exec_properties["collection"]
    threshold = float(exec_properties["threshold"])
    split = exec_properties.get("split") or "valid"
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
    blessing.set_int_custom_property(
        evaluator_constants.ARTIFACT_PROPERTY_CURRENT_MODEL_ID_KEY, model.id)
    blessing.set_string_custom_property("current_model", model.uri)
    blessing.set_string_custom_property("reason", reason)
    if baseline_model is not None:
      blessing.set_int_custom_property(
          evaluator_constants.ARTIFACT_PROPERTY_BASELINE_MODEL_ID_KEY,
          baseline_model.id)
    print(f"RankingEvaluator: {'BLESSED' if ok else 'NOT BLESSED'}: "
          f"{reason}", flush=True)


class RankingEvaluator(base_component.BaseComponent):
  """The ranking evaluator component.

  Init args:
    examples: The ExampleGen output (its `split` is scored).
    model: The Trainer's model.
    collection: e.g. "layout:xla:random" (picks the metrics).
    threshold: Least Kendall tau (layout) / most top-5 error (tile).
    baseline_model: The last blessed model (a resolver's output), if any.
    split: The split to evaluate on.
  """

  SPEC_CLASS = RankingEvaluatorSpec
  EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)

  def __init__(self, examples, model, collection: str, threshold: float,
               baseline_model=None, split: str = "valid"):
    super().__init__(spec=RankingEvaluatorSpec(
        examples=examples, model=model, baseline_model=baseline_model,
        evaluation=types.Channel(type=standard_artifacts.ModelEvaluation),
        blessing=types.Channel(type=standard_artifacts.ModelBlessing),
        collection=collection, threshold=threshold, split=split))
