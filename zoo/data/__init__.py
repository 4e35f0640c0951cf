"""Data sources behind one small interface: `load(spec) -> Dataset` (host arrays, batch indices, device gather)."""

from zoo.data import augment
from zoo.data.dataset import Dataset
from zoo.data.sources import load

__all__ = ["Dataset", "augment", "load"]
