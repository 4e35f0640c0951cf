"""Diagnostics that tell whether a parametrization does what its theory says."""

from zoo.diagnostics.report import run_report

__all__ = ["run_report"]
