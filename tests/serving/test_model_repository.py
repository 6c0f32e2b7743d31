"""The model repository: versions, resolution and concurrent publishing."""

import os
import stat
import threading

import pytest

from schemas.errors import InputError
from serving import model_repository


def _fake_model(path):
  """A directory shaped like a SavedModel (the repository reads no more)."""
  os.makedirs(os.path.join(path, "variables"))
  with open(os.path.join(path, "saved_model.pb"), "wb") as f:
    f.write(b"model")
  return str(path)


def test_versions_count_complete_models_and_numbers_are_never_reused(
    tmp_path):
  base = tmp_path / "m"
  _fake_model(base / "1")
  os.makedirs(base / "3")  # Claimed, not (yet) complete.
  assert model_repository.versions(str(base)) == [1]
  assert model_repository.next_version(str(base)) == 4
  assert model_repository.newest(str(base)) == str(base / "1")
  assert model_repository.resolve_model_dir(str(base)) == str(base / "1")
  assert model_repository.resolve_model_dir(str(base / "1")) == str(
      base / "1")
  with pytest.raises(InputError, match="numbered versions"):
    model_repository.resolve_model_dir(str(tmp_path / "none"))


def test_concurrent_publishes_get_distinct_complete_versions(tmp_path):
  model = _fake_model(tmp_path / "export")
  base = str(tmp_path / "repo")
  results, errors = [], []

  def publish():
    try:
      results.append(model_repository.publish(model, base, "tpurank"))
    except Exception as e:  # pylint: disable=broad-except
      errors.append(e)

  threads = [threading.Thread(target=publish) for _ in range(8)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  assert not errors
  target = os.path.join(base, "tpurank")
  assert sorted(int(os.path.basename(r)) for r in results) == list(
      range(1, 9))
  assert model_repository.versions(target) == list(range(1, 9))
  assert sorted(os.listdir(target)) == sorted(str(v) for v in range(1, 9))
  # Readable by a server running as another user.
  mode = os.stat(results[0]).st_mode
  assert mode & stat.S_IROTH and mode & stat.S_IXOTH
