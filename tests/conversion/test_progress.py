"""Tests for worker-reported progress of Beam jobs."""

import io

import apache_beam as beam

from conversion import progress


class _Mark(beam.DoFn):

  def __init__(self, marks):
    super().__init__()
    self._marks = marks

  def process(self, element):
    progress.mark_done(self._marks, element)
    yield element


def test_workers_marks_count_once_each_and_are_cleaned_up(tmp_path):
  marks = str(tmp_path / "out" / progress.PROGRESS_DIR)
  shown = io.StringIO()  # Not a terminal: plain lines.
  items = [f"g{i}.npz".encode() for i in range(7)]
  with progress.watch(marks, len(items), "converted", stream=shown,
                      poll_seconds=0.05):
    with beam.Pipeline() as p:
      # Every item twice, as a retried bundle would: counted once.
      _ = (p | beam.Create(items + items[:3]) | beam.ParDo(_Mark(marks)))
    assert progress.count(marks) == len(items)
  assert shown.getvalue().splitlines()[-1] == "converted: 7/7 graphs"
  assert not (tmp_path / "out" / progress.PROGRESS_DIR).exists()
