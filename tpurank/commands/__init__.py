"""Subcommands of the `tpurank` CLI, one module each.

Each module has `add_parser(subparsers)` and `run(args) -> int`. Modules are
imported only when their subcommand runs, so light commands stay fast.
"""

# Subcommand name -> module under tpurank.commands.
COMMANDS = {
    "synth": "synth",
    "validate": "validate",
    "convert": "convert",
    "featurize": "featurize",
    "train": "train",
    "hlo": "hlo",
    "pipeline": "pipeline",
    "rank": "rank",
    "serve": "serve",
    "score": "score",
}
