"""Keeps BUILD consistent with the tree: every module and test is a target."""

import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("conversion", "pipeline", "trainer", "serving", "schemas", "simulator",
            "featurize", "tpurank", "benchmarks")


def _named_in_build():
  text = open(os.path.join(ROOT, "BUILD")).read()
  return set(re.findall(r'"([\w/.-]+\.(?:py|pbtxt))"', text))


def _tree(pattern):
  return {os.path.relpath(p, ROOT)
          for p in glob.glob(os.path.join(ROOT, pattern), recursive=True)}


def test_every_module_is_in_a_target():
  modules = set().union(*(_tree(f"{p}/**/*.py") for p in PACKAGES))
  assert modules, "no modules found"
  missing = sorted(modules - _named_in_build())
  assert not missing, f"modules missing from BUILD: {missing}"


def test_every_test_file_is_a_target():
  tests = _tree("tests/**/test_*.py")
  missing = sorted(tests - _named_in_build())
  assert not missing, f"test files missing from BUILD: {missing}"


def test_build_names_only_existing_files():
  stale = sorted(p for p in _named_in_build()
                 if not os.path.exists(os.path.join(ROOT, p)))
  assert not stale, f"BUILD names files that do not exist: {stale}"


def test_schemas_data_is_declared():
  assert _tree("schemas/*.pbtxt") <= _named_in_build()
