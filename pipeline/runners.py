"""Running `create_pipeline`: locally, with Beam, or compiled for Vertex AI.

* `run_local`: TFX's LocalDagRunner (components in this process, Beam steps
  on the DirectRunner), a SQLite MLMD store.
* `run_beam`: TFX's BeamDagRunner: the pipeline itself is a Beam graph.
* `compile_vertex`: KubeflowV2DagRunner writes the pipeline JSON that Vertex
  AI Pipelines runs; `submit_vertex` submits it with google-cloud-aiplatform.
"""

from tfx import v1 as tfx

from schemas.errors import fail

RUNNERS = ("local", "beam")


def sqlite_metadata(path: str):
  """A SQLite MLMD connection config (the store is created if missing)."""
  return tfx.orchestration.metadata.sqlite_metadata_connection_config(path)


def run(pipeline, runner: str = "local") -> None:
  """Runs the pipeline to completion with "local" or "beam"."""
  if runner == "local":
    tfx.orchestration.LocalDagRunner().run(pipeline)
  elif runner == "beam":
    # Only `--runner beam` pays for loading Beam's DAG runner.
    # pylint: disable=g-import-not-at-top
    from tfx.orchestration.beam.beam_dag_runner import BeamDagRunner
    BeamDagRunner().run(pipeline)
  else:
    raise ValueError(f"unknown runner {runner!r}; expected one of {RUNNERS}")


def compile_vertex(pipeline, image: str, out_file: str) -> str:
  """Writes the Vertex AI Pipelines JSON of `pipeline`; returns its path."""
  runner = tfx.orchestration.experimental.KubeflowV2DagRunner(
      config=tfx.orchestration.experimental.KubeflowV2DagRunnerConfig(
          default_image=image),
      output_filename=out_file)
  runner.run(pipeline, write_out=True)
  return out_file


def submit_vertex(pipeline_json: str, project: str, region: str,
                  pipeline_root: str) -> str:
  """Submits a compiled pipeline to Vertex AI; returns the job's name.

  Raises:
    InputError: when no Google Cloud credentials are available (with what to
      do about it).
  """
  # Only `--submit` loads the Google Cloud clients (slow, optional).
  # pylint: disable=g-import-not-at-top
  import google.auth
  from google.auth import exceptions as auth_exceptions
  try:
    google.auth.default()
  except auth_exceptions.DefaultCredentialsError as e:
    raise fail("--submit", "credentials",
               "Google Cloud application-default credentials (run `gcloud "
               "auth application-default login` or set "
               "GOOGLE_APPLICATION_CREDENTIALS to a service-account key)",
               f"none ({str(e).splitlines()[0]})") from e
  from google.cloud import aiplatform
  aiplatform.init(project=project, location=region)
  job = aiplatform.PipelineJob(display_name="tpurank",
                               template_path=pipeline_json,
                               pipeline_root=pipeline_root)
  job.submit()
  return job.resource_name
