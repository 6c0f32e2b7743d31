"""The TFX pipeline: Beam conversion of TpuGraphs to GraphTensor TFRecords."""
