"""Beam pipeline flags: a command's defaults merged with the user's.

A flag the user gives replaces that flag's default and nothing else:
`--max_num_workers=4` keeps the default runner, project and image. Flags
are matched by name (`--temp-location` and `--temp_location` are one),
written `--name=value`, `--name value` or `--name` alone.

`for_runner` adapts a runner's own flags: `--runner DaskRunner` (a
dask.distributed cluster, `--dask_client_address HOST:PORT`) becomes the
module path Beam needs, with one graph file per Dask partition.
"""

import importlib
from typing import Optional, Sequence


def flag_name(token: str) -> Optional[str]:
  """The option name of a `--flag[=value]` token (dashes as underscores),
  None for a value token."""
  if not token.startswith("--") or token == "--":
    return None
  return token[2:].split("=", 1)[0].replace("-", "_")


def split_flags(args: Sequence[str]) -> list[tuple[Optional[str], list[str]]]:
  """(name, tokens) per flag, each with the value tokens that follow it (a
  leading value without a flag keeps name None)."""
  flags: list[tuple[Optional[str], list[str]]] = []
  for token in args:
    name = flag_name(token)
    if name is None and flags:
      flags[-1][1].append(token)
    else:
      flags.append((name, [token]))
  return flags


def merge(defaults: Sequence[str], user: Sequence[str]) -> list[str]:
  """`defaults` without the flags `user` names, then `user` as given."""
  given = {name for name, _ in split_flags(user)}
  kept = [tokens for name, tokens in split_flags(defaults)
          if name not in given]
  return [t for tokens in kept for t in tokens] + list(user)


# Beam knows the DaskRunner only by its module path; `--runner DaskRunner`
# (the name its docs and DaskOptions use) is accepted and expanded to it.
DASK_RUNNER = "apache_beam.runners.dask.dask_runner.DaskRunner"
# One graph file per Dask partition: a partition is Dask's unit of work (the
# DaskRunner ignores Reshuffle), and graphs differ in size by orders of
# magnitude, so the scheduler balances them file by file. Beam's default
# (128 elements per partition) would put a whole small collection on one
# worker.
DASK_DEFAULTS = ("--dask_partition_size=1",)
_DASK_PARTITIONING = {"dask_partition_size", "dask_npartitions"}


def runner(args: Sequence[str]) -> Optional[str]:
  """The value of the last `--runner` flag in `args` (None if none)."""
  found = None
  for name, tokens in split_flags(args):
    if name == "runner":
      found = (tokens[0].split("=", 1)[1] if "=" in tokens[0]
               else (tokens[1] if len(tokens) > 1 else ""))
  return found


def is_dask(args: Sequence[str]) -> bool:
  """Whether `args` ask for Beam's DaskRunner (short or full name)."""
  return runner(args) in ("DaskRunner", DASK_RUNNER)


def for_runner(args: Sequence[str]) -> list[str]:
  """`args` as Beam must see them for the runner they name: the DaskRunner's
  full name for `DaskRunner`, with DASK_DEFAULTS unless the user partitions
  the work otherwise. Any other runner's flags pass through unchanged.

  Importing the Dask runner module also registers Beam's DaskOptions
  (`--dask_client_address`, ...), so they are known flags from then on.
  """
  if not is_dask(args):
    return list(args)
  importlib.import_module(DASK_RUNNER.rsplit(".", 1)[0])
  given = {name for name, _ in split_flags(args)}
  out = [] if given & _DASK_PARTITIONING else list(DASK_DEFAULTS)
  for name, tokens in split_flags(args):
    if name == "runner":
      tokens = [f"--runner={DASK_RUNNER}"]
    out += tokens
  return out
