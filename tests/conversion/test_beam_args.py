"""Tests for merging a command's default Beam flags with the user's."""

from hypothesis import given
from hypothesis import strategies as st

from conversion import beam_args
from conversion import convert_job

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
  assert convert_job.default_beam_args(["--runner", "DaskRunner"]) == [
      "--runner", "DaskRunner"]


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
