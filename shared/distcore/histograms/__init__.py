"""Histograms from TensorBoard events: decoded from any writer, compressed to TensorBoard's
distribution bands, kept per run within a bound (see decode.py, compress.py, store.py).

The names below load lazily, as distcore.events's do: `import distcore.histograms.records` (which
the run snapshots name) costs the standard library only; the decoder's numpy, protobuf and
TensorBoard come with what uses them. The compressor is `distcore.histograms.compress.compress`:
a lazy name cannot share its module's name (the submodule, once imported, is the attribute).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from distcore.lazy import lazy_names

if TYPE_CHECKING:  # what the lazy names below are, for type checkers
    from distcore.histograms.buckets import Buckets
    from distcore.histograms.compress import BAND_KEYS, BASIS_POINTS
    from distcore.histograms.decode import HISTOGRAMS_PLUGIN, from_histo_proto, from_tensor
    from distcore.histograms.records import HistogramPoint, HistogramSeries

_LAZY = {
    "BAND_KEYS": "compress",
    "BASIS_POINTS": "compress",
    "Buckets": "buckets",
    "HISTOGRAMS_PLUGIN": "decode",
    "HistogramPoint": "records",
    "HistogramSeries": "records",
    "from_histo_proto": "decode",
    "from_tensor": "decode",
}

__all__ = [
    "BAND_KEYS", "BASIS_POINTS", "HISTOGRAMS_PLUGIN", "Buckets", "HistogramPoint",
    "HistogramSeries", "from_histo_proto", "from_tensor",
]


__getattr__ = lazy_names(__name__, _LAZY)
