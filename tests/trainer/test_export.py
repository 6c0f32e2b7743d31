"""The exported SavedModel: TF Serving layout, plain-TF loading, same order."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np

from serving import model_repository
from tests.trainer.helpers import make_records, unit_stats
from trainer import export
from trainer import hparams
from trainer import input_fn
from trainer import model as model_lib

_LOAD = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    serialized = [open(p, "rb").read() for p in sys.argv[2:]]
    fn = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
    out = fn(examples=tf.constant(serialized))
    print(json.dumps({"gnn_loaded": "tensorflow_gnn" in sys.modules,
                      "scores": out["scores"].numpy().tolist(),
                      "index": out["config_index"].numpy().tolist()}))
""")


def test_export_loads_without_tfgnn_and_ranks_like_the_model(tmp_path):
  for kind in ("tile", "layout"):
    path, _ = make_records(tmp_path, kind, graphs=2, k=5, split="valid")
    serialized = [s.numpy() for s in input_fn.read_records([path]).take(3)]
    graph = input_fn.model_input(kind, np.array(serialized, dtype=object))
    sm = model_lib.build_score_model(hparams.ModelConfig(kind=kind),
                                     graph.spec.relax(num_components=True,
                                                      num_nodes=True,
                                                      num_edges=True),
                                     unit_stats())
    base = str(tmp_path / f"models-{kind}")
    v1, v2 = [export.save(sm, kind, os.path.join(base, str(
        model_repository.next_version(base))), {"collection": "test"})
              for _ in range(2)]
    assert [os.path.basename(v) for v in (v1, v2)] == ["1", "2"]
    assert os.path.exists(os.path.join(v1, "saved_model.pb"))
    assert export.read_metadata(v2)["version"] == 2
    files = []
    for i, s in enumerate(serialized):
      files.append(str(tmp_path / f"{kind}-ex{i}.bin"))
      open(files[-1], "wb").write(s)
    r = subprocess.run([sys.executable, "-c", _LOAD, v2, *files],
                       capture_output=True, text=True, check=True)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["gnn_loaded"] is False
    scores = np.array(out["scores"])
    index = np.array(out["index"])
    inproc = sm(graph)
    flat = inproc["scores"].numpy()
    start = 0
    for row in range(len(serialized)):
      n = int((index[row] >= 0).sum())
      want = flat[start:start + n]
      # Lower served score = faster = higher in-process relevance.
      np.testing.assert_allclose(scores[row, :n], -want, rtol=1e-5,
                                 atol=1e-6)
      assert np.array_equal(np.argsort(scores[row, :n]), np.argsort(-want))
      start += n
