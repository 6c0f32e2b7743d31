"""Graphs done / total of a Beam job, reported by its workers on any runner.

A worker marks each graph file it has finished (converted or dead-lettered)
with an empty file in the job's progress directory, on any filesystem Beam
writes to (local, gs://), named by a hash of the file's path so a retried
bundle counts once. The launching process counts the markers while the job
runs and shows the count. Beam metrics cannot do this: not every runner
reports them while a job runs, and the DaskRunner reports none.
"""

import contextlib
import hashlib
import sys
import threading
import time
from typing import Iterator, Optional, TextIO

from apache_beam.io.filesystems import FileSystems
from tqdm import tqdm

PROGRESS_DIR = ".progress"  # Under a job's output directory.
# Without a terminal: a plain line at most this often (and at the end).
LINE_SECONDS = 10.0


def mark_done(progress_dir: str, element) -> None:
  """Marks one input (a path, as str or bytes) done."""
  raw = element if isinstance(element, bytes) else str(element).encode(
      "utf-8", "surrogateescape")
  name = hashlib.sha1(raw).hexdigest()[:24]
  FileSystems.create(FileSystems.join(progress_dir, name)).close()


def marking(progress_dir: Optional[str], element, outputs):
  """A DoFn's `outputs` for `element`, then its mark (if `progress_dir`):
  the input counts as done once everything it yields has gone out."""
  yield from outputs
  if progress_dir:
    mark_done(progress_dir, element)


def count(progress_dir: str) -> int:
  """Inputs marked done so far (0 before the first)."""
  try:
    match = FileSystems.match([FileSystems.join(progress_dir, "*")])
  except Exception:  # pylint: disable=broad-except
    return 0  # The directory does not exist yet.
  return len(match[0].metadata_list)


def remove_dir(path: str) -> None:
  """Removes a directory of files (not nested) on any filesystem."""
  # The files first (on GCS a directory is only a prefix: deleting its
  # bare name removes nothing), then the directory itself (local disks).
  with contextlib.suppress(Exception):
    match = FileSystems.match([FileSystems.join(path, "*")])
    files = [m.path for m in match[0].metadata_list]
    if files:
      FileSystems.delete(files)
  with contextlib.suppress(Exception):
    FileSystems.delete([path])


@contextlib.contextmanager
def watch(progress_dir: str, total: Optional[int], label: str,
          stream: Optional[TextIO] = None,
          poll_seconds: float = 1.0) -> Iterator[None]:
  """Shows `label: done/total graphs` (`done graphs` when the total is not
  known ahead, None) while the block runs: a progress bar on a terminal,
  else a plain line at most every LINE_SECONDS. Clears the progress
  directory first (markers of an interrupted run) and removes it at the
  end."""
  remove_dir(progress_dir)
  stream = stream or sys.stdout
  terminal = stream.isatty()
  stop = threading.Event()

  def loop():
    bar = (tqdm(total=total, desc=label, unit="graph", file=stream,
                dynamic_ncols=True) if terminal else None)
    shown, last = -1, time.monotonic()
    while True:
      finished = stop.wait(poll_seconds)
      done = count(progress_dir)
      if bar is not None:
        bar.update(done - bar.n)
      elif done != shown and (finished or
                              time.monotonic() - last >= LINE_SECONDS):
        of = "" if total is None else f"/{total}"
        print(f"{label}: {done}{of} graphs", file=stream, flush=True)
        shown, last = done, time.monotonic()
      if finished:
        break
    if bar is not None:
      bar.close()

  thread = threading.Thread(target=loop, daemon=True)
  thread.start()
  try:
    yield
  finally:
    stop.set()
    thread.join()
    remove_dir(progress_dir)
