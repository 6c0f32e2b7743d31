"""tpurank's own output, apart from library noise.

While a command runs, file descriptor 2 goes to a log file: TensorFlow's
C++ logs, Python warnings, library loggers and every Beam worker process
(they inherit it) write there. tpurank's own lines go to the terminal:
results on stdout, errors through `err()`, and the `tpurank.*` loggers
(e.g. the server's request log) to the terminal's stderr. The command ends
by naming the log when anything was written to it.

`TPURANK_LOG_DIR` chooses where logs go (default
`$XDG_CACHE_HOME/tpurank/logs`, else `~/.cache/tpurank/logs`); `-` keeps
everything on the terminal. When stderr is not file descriptor 2 (e.g.
captured by a test harness), nothing is redirected.
"""

import contextlib
import logging
import os
import sys
import time
from typing import Iterator, Optional, TextIO

LOG_DIR_ENV = "TPURANK_LOG_DIR"
OWN_LOGGER = "tpurank"  # Loggers under this name are tpurank's own lines.

_console: Optional[TextIO] = None


def err() -> TextIO:
  """Where tpurank's own error and status lines go: the terminal's stderr."""
  return _console or sys.stderr


def log_dir() -> Optional[str]:
  """The directory library logs go to; None: not redirected."""
  chosen = os.environ.get(LOG_DIR_ENV)
  if chosen == "-":
    return None
  if chosen:
    return chosen
  cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(
      os.path.expanduser("~"), ".cache")
  return os.path.join(cache, "tpurank", "logs")


def _stderr_is_fd2() -> bool:
  try:
    return sys.stderr.fileno() == 2
  except (AttributeError, OSError, ValueError):
    return False


@contextlib.contextmanager
def library_log(command: str) -> Iterator[Optional[str]]:
  """Sends file descriptor 2 to a new log file while the block runs.

  Yields:
    The log's path, or None when nothing is redirected.
  """
  global _console
  directory = log_dir()
  if directory is None or not _stderr_is_fd2():
    yield None
    return
  try:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{command}-{time.strftime('%Y%m%d-%H%M%S')}"
                        f"-{os.getpid()}.log")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
  except OSError:  # No writable log directory: leave stderr as it is.
    yield None
    return
  sys.stderr.flush()
  saved = os.dup(2)
  os.dup2(fd, 2)
  os.close(fd)
  # As sys.stderr does: a path that is not valid UTF-8 must not crash the
  # line that names it.
  _console = os.fdopen(os.dup(saved), "w", buffering=1,
                       errors="backslashreplace")
  own = logging.getLogger(OWN_LOGGER)
  before = own.level, own.propagate
  handler = logging.StreamHandler(_console)
  handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
  own.addHandler(handler)
  own.propagate = False
  own.setLevel(logging.INFO)
  try:
    yield path
  finally:
    sys.stderr.flush()
    own.removeHandler(handler)
    own.level, own.propagate = before
    os.dup2(saved, 2)
    os.close(saved)
    _console.close()
    _console = None
