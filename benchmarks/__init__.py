"""Benchmarks of tpurank: speed and memory, each writing a report file."""
