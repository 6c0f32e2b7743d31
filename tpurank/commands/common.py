"""Flags that several subcommands share, with defaults from their one home."""

from conversion import options


def add_conversion_flags(p, eval_k: bool = False):
  """--k, [--eval-k], --hops, --max-examples and --seed of conversion."""
  p.add_argument("--k", type=int, default=options.K,
                 help="configs per train example")
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
