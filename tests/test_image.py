"""The container image recipe: pinned, built from the lock, and `make image`
saying plainly when it cannot build."""

import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(name):
  with open(os.path.join(ROOT, name)) as f:
    return f.read()


def _arg(dockerfile, name):
  return re.search(rf"^ARG {name}=(\S+)$", dockerfile, re.M).group(1)


def test_dockerfile_pins_python_beam_and_uv_as_the_lock_does():
  dockerfile = _read("Dockerfile")
  lock = _read("requirements.lock")
  assert re.fullmatch(r"python:3\.10\.\d+-slim-\w+",
                      _arg(dockerfile, "PYTHON_IMAGE"))
  beam = re.search(r"^apache-beam==(\S+)$", lock, re.M).group(1)
  assert _arg(dockerfile, "BEAM_VERSION") == beam
  assert "apache/beam_python3.10_sdk:${BEAM_VERSION}" in dockerfile
  uv = re.search(r"^UV_VERSION := (\S+)$", _read("Makefile"), re.M).group(1)
  assert f"uv=={uv}" in dockerfile
  # Exactly the lock, then the project without re-resolving anything.
  assert "uv pip sync --system --no-cache requirements.lock" in dockerfile
  assert "--no-deps ." in dockerfile
  ignored = _read(".dockerignore").split()
  assert {".venv", ".git", "demo_out"} <= set(ignored)


def _make_image(*args):
  return subprocess.run(["make", "-s", "image", *args], cwd=ROOT,
                        capture_output=True, text=True, check=False)


def test_make_image_says_why_it_did_not_build():
  r = _make_image()
  assert r.returncode != 0 and "IMAGE=" in r.stderr
  r = _make_image("IMAGE=example.com/p/tpurank:1",
                  "DOCKER=/nonexistent/docker")
  assert r.returncode != 0
  assert "docker is not installed" in r.stderr
  assert "docker build --build-arg BEAM_VERSION=" in r.stderr
