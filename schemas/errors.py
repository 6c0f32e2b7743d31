"""The one error type that bad input raises, and how it reads."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Problem:
  """One thing wrong with one input file.

  Attributes:
    path: The file (or directory) at fault.
    field: The key, field or part of the file that is wrong.
    expected: What the format requires there.
    found: What the file holds instead.
  """
  path: str
  field: str
  expected: str
  found: str

  def __str__(self) -> str:
    return f"{self.path}: {self.field}: expected {self.expected}, found {self.found}"


class InputError(Exception):
  """Bad input: the CLI prints it as one line and exits with code 2.

  Init args:
    problem: The first (or only) problem found.
  """

  def __init__(self, problem: Problem):
    super().__init__(str(problem))
    self.problem = problem


def fail(path: str, field: str, expected: str, found: str) -> InputError:
  """Builds an InputError from its parts (to be raised by the caller)."""
  return InputError(Problem(str(path), field, expected, found))
