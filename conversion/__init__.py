"""Conversion: TpuGraphs graphs -> pruned GraphTensor examples (Beam).

The layer under the trainer, serving and the TFX pipeline: pruning to the
configurable neighbourhood, one graph to examples, the Beam PTransform and
job with dead letters, graph file listing and local record writing.
"""
