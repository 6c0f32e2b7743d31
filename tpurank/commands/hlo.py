"""`tpurank hlo`: your TensorFlow function as a layout graph to rank."""

import json


def add_parser(sub):
  p = sub.add_parser(
      "hlo", help="compile a TensorFlow function with XLA into a TpuGraphs "
      "layout graph with candidate layout configs",
      description="Compiles FILE.py:FUNCTION with XLA for the given input "
      "shapes, featurizes its HLO module (as real TPU protos are), and "
      "enumerates candidate layout configurations of its convolution, dot "
      "and reshape ops (minor-to-major permutations; -1 = compiler "
      "default; config 0 = all default). Rank them with `tpurank rank "
      "--graph OUT --model DIR`.")
  p.add_argument("--module", required=True, help="FILE.py:FUNCTION")
  p.add_argument("--input-shapes", required=True,
                 help="one shape per argument, comma-separated: 64x128 "
                 "(float32) or with a dtype, bf16:64x128")
  p.add_argument("--out", required=True, help="the .npz to write")
  p.add_argument("--configs", type=int, default=1000,
                 help="candidate configurations to enumerate")
  p.add_argument("--seed", type=int, default=0)


def run(args) -> int:
  # Loaded when the command runs, not at start-up: keeps the CLI fast.
  from featurize import tf_function  # pylint: disable=g-import-not-at-top
  from schemas import npz_format  # pylint: disable=g-import-not-at-top
  fn = tf_function.load_function(args.module)
  shapes = tf_function.parse_shapes(args.input_shapes)
  out = tf_function.write_graph(fn, shapes, args.out, args.configs, args.seed)
  g = npz_format.load_graph(out)
  print(f"{out}: {g.num_nodes} nodes, {len(g.node_config_ids)} configurable "
        f"nodes, {g.num_configs} candidate configs (runtimes unknown)")
  print(json.dumps({"out": out, "nodes": g.num_nodes,
                    "configs": g.num_configs}))
  return 0
