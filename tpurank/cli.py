"""The `tpurank` console command: dispatches to subcommands.

Bad input surfaces as one line naming the file and the field, exit code 2,
no traceback.
"""

import argparse
import contextlib
import importlib
import logging
import os
import sys
import traceback
import warnings

from schemas.errors import InputError
from tpurank import __version__
from tpurank import console
from tpurank.commands import COMMANDS

EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
  """A subcommand parser whose --help shows every flag's default."""

  def add_argument(self, *args, **kwargs):
    action = super().add_argument(*args, **kwargs)
    shown = not any(action.default is v for v in (None, False,
                                                  argparse.SUPPRESS))
    if (action.option_strings and shown and action.help is not
        argparse.SUPPRESS and "%(default)" not in (action.help or "")):
      action.help = f"{action.help or ''} (default: %(default)s)".lstrip()
    return action


def _module(name: str):
  return importlib.import_module(f"tpurank.commands.{COMMANDS[name]}")


def build_parser(only=None) -> argparse.ArgumentParser:
  """The argument parser; `only` limits which subcommand modules load."""
  parser = argparse.ArgumentParser(
      prog="tpurank",
      description="Rank XLA compiler configurations (tile sizes, layouts) of "
      "TPU programs with a graph neural network.")
  parser.add_argument("--version", action="version",
                      version=f"tpurank {__version__}")
  sub = parser.add_subparsers(dest="command", metavar="COMMAND",
                              parser_class=_Parser)
  sub.required = True
  for name in COMMANDS:
    if only is None or name == only:
      _module(name).add_parser(sub)
    else:
      sub.add_parser(name, help=f"(see tpurank {name} --help)")
  return parser


def _quiet_libraries():
  """Keeps TensorFlow's start-up chatter (CUDA probes on CPU machines,
  deprecation notes) out of the user's terminal; errors still show."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  warnings.filterwarnings("ignore", category=FutureWarning)
  warnings.filterwarnings("ignore", category=DeprecationWarning)
  for name in ("tensorflow", "apache_beam", "absl"):
    logging.getLogger(name).setLevel(logging.ERROR)


def main(argv=None) -> int:
  _quiet_libraries()
  argv = sys.argv[1:] if argv is None else list(argv)
  # Load only the chosen subcommand's module (and so its imports).
  chosen = next((a for a in argv if not a.startswith("-")), None)
  # From here on, what libraries print (also while the command's modules
  # import) goes to the log; usage errors still reach the terminal.
  with console.library_log(chosen if chosen in COMMANDS else "tpurank") as log:
    # Bad input is one line; an unexpected error's line names the log.
    name_log = True
    try:
      # Loading the command's module may import libraries: not redirected.
      parser = build_parser(only=chosen if chosen in COMMANDS else None)
      with contextlib.redirect_stderr(console.err()):
        args, extra = parser.parse_known_args(argv)
        if extra:
          # Commands that run Beam pass unknown flags on as Beam options.
          if not getattr(_module(args.command), "ACCEPTS_BEAM_ARGS", False):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
      args.beam_args = extra
      return int(_module(args.command).run(args) or 0)
    except InputError as e:
      name_log = False
      print(f"tpurank: error: {e}", file=console.err())
      return EXIT_BAD_INPUT
    except KeyboardInterrupt:
      print("tpurank: interrupted", file=console.err())
      return 130
    except Exception as e:  # pylint: disable=broad-except
      if log is None:
        raise
      # A bug, not bad input: the traceback goes to the log it names.
      name_log = False
      traceback.print_exc()
      print(f"tpurank: error: unexpected {type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else ''} (traceback in "
            f"{log})", file=console.err())
      return 1
    finally:
      sys.stderr.flush()  # All of it in the log before it is measured.
      if log and os.path.exists(log):
        if not os.path.getsize(log):
          os.remove(log)
        elif name_log:
          print(f"tpurank: library messages (warnings, logs) in {log}",
                file=console.err())


if __name__ == "__main__":
  sys.exit(main())
