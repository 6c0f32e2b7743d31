"""Flags that several subcommands share, with defaults from their one home."""

from conversion import options
from serving import options as serving_options


def add_conversion_flags(p, eval_k: bool = False):
  """--k, [--eval-k], --hops, --max-examples and --seed of conversion."""
  p.add_argument("--k", type=int, default=None,
                 help="configs per train example (default: tile {tile}, "
                 "layout {layout}; with --join early {early})".format(
                     early=options.EARLY_JOIN_K, **options.K))
  if eval_k:
    p.add_argument("--eval-k", type=int, default=options.EVAL_K,
                   help="configs per valid/test example")
  p.add_argument("--hops", type=int, default=options.DEFAULT_HOPS,
                 help=options.HOPS_HELP)
  p.add_argument("--max-examples", type=int, default=None,
                 help="examples (chunks of K configs) per train graph; 0: all "
                 "(default: tile {tile}, layout {layout})".format(
                     **options.MAX_EXAMPLES))
  p.add_argument("--seed", type=int, default=options.SEED)


def add_guard_flags(p):
  """--default-config / --no-default-guard (`trainer/default_guard`)."""
  p.add_argument("--default-config", type=int,
                 default=serving_options.DEFAULT_CONFIG,
                 help="tile: index of the compiler's default config, kept "
                 "first unless the model is confident a config beats it "
                 "(its calibrated margin); tpurank featurize and synth put "
                 "it first, official TpuGraphs files do not mark it")
  p.add_argument("--no-default-guard", action="store_true",
                 help="tile: rank by the model's scores alone")


def guard_config(args):
  """The default config index the guard keeps, or None (no guard)."""
  return None if args.no_default_guard else args.default_config
