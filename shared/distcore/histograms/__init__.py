"""Histograms from TensorBoard events: decoded from any writer, compressed to TensorBoard's
distribution bands, kept per run within a bound (see decode.py, compress.py, store.py)."""

from distcore.histograms.compress import BAND_KEYS, BASIS_POINTS, compress
from distcore.histograms.decode import HISTOGRAMS_PLUGIN, from_histo_proto, from_tensor
from distcore.histograms.model import Buckets, HistogramPoint, HistogramSeries

__all__ = [
    "BAND_KEYS", "BASIS_POINTS", "HISTOGRAMS_PLUGIN", "Buckets", "HistogramPoint",
    "HistogramSeries", "compress", "from_histo_proto", "from_tensor",
]
