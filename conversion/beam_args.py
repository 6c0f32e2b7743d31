"""Beam pipeline flags: a command's defaults merged with the user's.

A flag the user gives replaces that flag's default and nothing else:
`--max_num_workers=4` keeps the default runner, project and image. Flags
are matched by name (`--temp-location` and `--temp_location` are one),
written `--name=value`, `--name value` or `--name` alone.
"""

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
