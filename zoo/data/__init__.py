"""Data sources behind one small interface: `load(spec or DataConfig) -> DataView`, either an in-memory `Dataset`
(host arrays, batch indices, device gather) or a `Streamed` set read batch by batch through `stream` (grain).
Sources are a registry (`zoo.data.sources.SOURCES`)."""

from zoo.data import augment
from zoo.data.config import DataConfig
from zoo.data.dataset import Dataset
from zoo.data.sources import load
from zoo.data.stream import DataError, stream
from zoo.data.streamed import Streamed
from zoo.data.view import DataView

__all__ = ["DataConfig", "DataError", "DataView", "Dataset", "Streamed", "augment", "load", "stream"]
