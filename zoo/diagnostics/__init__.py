"""Diagnostics that tell whether a parametrization does what its theory says."""
