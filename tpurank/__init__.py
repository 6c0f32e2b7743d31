"""tpurank: learns to rank XLA compiler configurations of TPU programs."""

__version__ = "0.1.0"
