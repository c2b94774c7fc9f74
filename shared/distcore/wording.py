"""Counts in messages: "1 image", "2 images" (never "1 images" or "image(s)").

Hand-written: two lines, where inflect-style libraries would be a dependency for every message
that counts something, and the nouns here are ours (English, a plural given where irregular).
"""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`count` and the noun in its number: the plural is `noun + "s"` unless given."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
