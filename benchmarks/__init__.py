"""Side-by-side benchmarks for langchain_turntrim: ``python -m benchmarks --help``."""
