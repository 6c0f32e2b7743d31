"""Defaults of the model server and of model calls: their one home.

Importable without TensorFlow, so `tpurank serve --help` shows them and the
server, the scorers and the CLI read the same values.
"""

from trainer import call_cost

MODEL_NAME = "tpurank"  # <base>/<MODEL_NAME>/<version>/ in a repository.
HOST = "127.0.0.1"  # Loopback unless the user binds elsewhere.
REST_PORT = 8501  # TF Serving's ports.
GRPC_PORT = 8500
POLL_SECONDS = 2.0  # How often the repository is scanned for new versions.
MAX_REQUEST_BYTES = 64 << 20
MAX_CONCURRENT = 2  # CPU-bound: more in flight only adds memory.
MAX_EXAMPLES = 16  # Examples per request.
QUEUE_SECONDS = 30.0  # Wait for a prediction slot before 429.
# A REST connection idle (or sending its request) this long is closed.
READ_TIMEOUT_SECONDS = 30.0
# Open REST connections at once; more are answered 503 and closed.
MAX_CONNECTIONS = 64
MAX_OP_COPIES = call_cost.OP_COPY_BUDGET  # Op copies per model call.
# The compiler's default config of a tile graph (trainer/default_guard):
# config 0 in files from `tpurank featurize` and `tpurank synth`.
DEFAULT_CONFIG = 0
