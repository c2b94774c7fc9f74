"""The `--once --json` shape that docs/watching.md publishes, held against real documents.

The published block names every key a reader may meet; a key that a real document holds and
the block does not name is a schema change nobody wrote down. Keys below a data-keyed mapping
(tags, hparams, percentiles, ledger buckets, GPU-hours per bucket) and the per-device and
per-host telemetry fields, which the block abbreviates with `...`, are not checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parents[1] / "docs" / "watching.md"
DATA_KEYED = frozenset({"scalars", "histograms", "hparams", "percentiles", "seconds", "stats",
                        "gpu_hours_by_bucket"})
ABBREVIATED = frozenset({"gpus.devices", "host", "hosts[].gpus"})  # written `...` there


def documented_keys(text: str | None = None) -> frozenset[str]:
    """Every quoted key in the first code block after "`--json` prints one document"."""
    text = DOCS.read_text(encoding="utf-8") if text is None else text
    start = text.index("`--json` prints one document")
    block = text[text.index("```", start) + 3:]
    block = block[:block.index("```")]
    return frozenset(re.findall(r'"([A-Za-z_][A-Za-z_0-9]*)"', block))


def keys_in(doc: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(dotted path, key) for every key a reader meets, above the unchecked mappings."""
    if isinstance(doc, list):
        for item in doc:
            yield from keys_in(item, path + "[]")
    elif isinstance(doc, dict):
        for key, value in doc.items():
            yield path, key
            below = f"{path}.{key}" if path else key
            if key not in DATA_KEYED and below not in ABBREVIATED:
                yield from keys_in(value, below)


def undocumented(doc: Any) -> list[str]:
    known = documented_keys()
    return sorted({f"{path}.{key}" if path else key
                   for path, key in keys_in(doc) if key not in known})
