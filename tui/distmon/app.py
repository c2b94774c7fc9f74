"""The Textual dashboard (dashboard issue)."""

from __future__ import annotations

from distcore.errors import DistmonError
from distmon.options import Options


def run_app(options: Options) -> int:
    raise DistmonError("the live dashboard is not built yet; use --once")
