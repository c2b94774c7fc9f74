"""distmon: the terminal dashboard. Never imports tensorflow (a test enforces it)."""

from distcore import __version__

__all__ = ["__version__"]
