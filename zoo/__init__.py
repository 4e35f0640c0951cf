"""zoo: a JAX/Flax model zoo whose models take a parametrization plugin."""

__version__ = "0.1.0"
