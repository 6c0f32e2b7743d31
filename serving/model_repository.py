"""A model repository in TF Serving's layout, and its `models.config`.

    <base>/<name>/<version>/saved_model.pb

`tensorflow_model_server --model_config_file=<base>/models.config` (or the
`tensorflow/serving` container with <base> mounted) serves every model in
it, as does `tpurank serve --model-base <base>`. Versions are integers; the
highest complete one is served (a version appears only once its
saved_model.pb is written: `trainer.export.save` writes aside and renames).
"""

import os
import shutil
import tempfile
from typing import Optional

from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from schemas.errors import fail

CONFIG_FILE = "models.config"


def _numbered(model_base: str) -> list[int]:
  return [int(d) for d in os.listdir(model_base) if d.isdigit()] if (
      os.path.isdir(model_base)) else []


def versions(model_base: str) -> list[int]:
  """Complete numeric versions of one model, ascending (TF Serving serves
  the highest)."""
  return sorted(v for v in _numbered(model_base) if os.path.exists(
      os.path.join(model_base, str(v), "saved_model.pb")))


def next_version(model_base: str) -> int:
  """1 + the highest numbered directory, complete or not (never reused)."""
  return max(_numbered(model_base), default=0) + 1


def newest(model_base: str) -> Optional[str]:
  """The directory of the newest complete version, or None."""
  found = versions(model_base)
  return os.path.join(model_base, str(found[-1])) if found else None


def resolve_model_dir(path: str) -> str:
  """A SavedModel directory as given, or the newest version under a base.

  Raises:
    InputError: `path` is neither.
  """
  if os.path.exists(os.path.join(path, "saved_model.pb")):
    return path
  found = newest(path)
  if found is None:
    raise fail(path, "model", "a SavedModel dir or numbered versions",
               "neither")
  return found


def models(base: str) -> dict[str, list[int]]:
  """{model name: versions} of every model under `base` with a version."""
  if not os.path.isdir(base):
    raise fail(base, "model base", "a directory of <name>/<version>/ "
               "SavedModels", "no such directory")
  found = {}
  for name in sorted(os.listdir(base)):
    v = versions(os.path.join(base, name))
    if v:
      found[name] = v
  return found


def models_config(base: str, container_base: Optional[str] = None) -> str:
  """TF Serving's model config (text proto) for every model under `base`.

  Args:
    base: The repository.
    container_base: The path the server sees `base` at (e.g. "/models" in
      the tensorflow/serving container); default: `base` itself.
  """
  config = model_server_config_pb2.ModelServerConfig()
  for name in models(base):
    m = config.model_config_list.config.add()
    m.name = name
    m.base_path = os.path.join(container_base or os.path.abspath(base), name)
    m.model_platform = "tensorflow"
    m.model_version_policy.latest.num_versions = 1
  return text_format.MessageToString(config)


def write_models_config(base: str, container_base: Optional[str] = None
                        ) -> str:
  """Writes `<base>/models.config`; returns its path."""
  if not models(base):
    raise fail(base, "model base", "at least one <name>/<version>/"
               "saved_model.pb", "none")
  path = os.path.join(base, CONFIG_FILE)
  with open(path + ".tmp", "w") as f:
    f.write(models_config(base, container_base))
  os.replace(path + ".tmp", path)
  return path


def publish(model_dir: str, base: str, name: str) -> str:
  """Copies one exported SavedModel in as the next version of `name`.

  The copy is made aside and renamed into place, so a polling server never
  sees half a model. Returns the new version directory.
  """
  if not os.path.exists(os.path.join(model_dir, "saved_model.pb")):
    raise fail(model_dir, "model", "a SavedModel directory", "no "
               "saved_model.pb")
  target_base = os.path.join(base, name)
  os.makedirs(target_base, exist_ok=True)
  # A private copy first, then a version claimed by mkdir (atomic: two
  # publishers never get the same number) and replaced by the copy in one
  # rename; an empty claimed directory is no version to a server.
  tmp = tempfile.mkdtemp(prefix=".tmp-", dir=target_base)
  os.chmod(tmp, 0o755)  # mkdtemp's 0700 would hide it from a server user.
  try:
    shutil.copytree(model_dir, tmp, dirs_exist_ok=True)
    while True:
      final = os.path.join(target_base, str(next_version(target_base)))
      try:
        os.mkdir(final)
      except FileExistsError:
        continue
      os.rename(tmp, final)
      return final
  finally:
    shutil.rmtree(tmp, ignore_errors=True)
