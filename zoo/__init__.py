"""zoo: a JAX/Flax model zoo whose models take a parametrization plugin."""

import os

# XLA's C++ warnings (the SPMD partitioner's notes on small meshes, ...) off the terminal, as every library's log
# noise (zoo.cli.boundary): read once, when jaxlib loads, so it is set here, before anything imports JAX; a
# TF_CPP_MIN_LOG_LEVEL already set wins (0 shows them).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

__version__ = "0.1.0"
