"""Entry point of the Bazel py_test targets: runs pytest on the given files."""

import sys

import pytest

if __name__ == "__main__":
  sys.exit(pytest.main(["-q", *sys.argv[1:]]))
