"""Tests for merging a command's default Beam flags with the user's."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conversion import beam_args
from conversion import convert_job
from schemas.errors import InputError

DEFAULTS = ["--runner=DataflowRunner", "--project=p", "--region=r",
            "--temp_location=gs://b/tmp", "--sdk_container_image=img"]


def test_a_user_flag_replaces_only_itself():
  got = beam_args.merge(DEFAULTS, ["--max_num_workers=4"])
  assert got == DEFAULTS + ["--max_num_workers=4"]
  got = beam_args.merge(DEFAULTS, ["--temp-location", "gs://c/tmp",
                                   "--runner=DirectRunner"])
  assert got == ["--project=p", "--region=r", "--sdk_container_image=img",
                 "--temp-location", "gs://c/tmp", "--runner=DirectRunner"]


def test_direct_runner_defaults_merge_too():
  got = convert_job.default_beam_args(["--direct_num_workers=1"])
  assert got[0] == "--runner=DirectRunner"
  assert [a for a in got if "direct_num_workers" in a] == [
      "--direct_num_workers=1"]
  # A runner of the user's own: its flags alone.
  assert convert_job.default_beam_args(["--runner", "FlinkRunner"]) == [
      "--runner", "FlinkRunner"]


def test_dask_runner_gets_its_full_name_and_one_file_per_partition():
  full = beam_args.DASK_RUNNER
  assert convert_job.default_beam_args(
      ["--runner", "DaskRunner", "--dask_client_address", "h:1"]) == [
          "--dask_partition_size=1", f"--runner={full}",
          "--dask_client_address", "h:1"]
  # The user's own partitioning replaces the default; no DirectRunner flag.
  got = convert_job.default_beam_args([f"--runner={full}",
                                       "--dask_npartitions=3"])
  assert got == [f"--runner={full}", "--dask_npartitions=3"]
  opts = convert_job.pipeline_options(["--runner=DaskRunner",
                                       "--dask_client_address=h:1"])
  assert opts.get_all_options()["runner"] == full


def test_a_dask_flag_without_the_dask_runner_is_an_error():
  with pytest.raises(InputError, match="--dask_client_address: expected "
                     "--runner DaskRunner"):
    convert_job.pipeline_options(["--dask_client_address=h:1"])


_names = st.sampled_from(["runner", "project", "region", "temp_location",
                          "max_num_workers", "sdk_container_image"])
_flags = st.lists(st.tuples(_names, st.text("abc123", min_size=1)),
                  max_size=6, unique_by=lambda f: f[0])


@given(_flags, _flags)
def test_merge_keeps_every_user_flag_and_every_default_not_given(defaults,
                                                                 user):
  d = [f"--{n}={v}" for n, v in defaults]
  u = [f"--{n}={v}" for n, v in user]
  merged = dict(a[2:].split("=", 1) for a in beam_args.merge(d, u))
  assert merged == {**dict(defaults), **dict(user)}
