"""Recognise the loss and accuracy tags of common writers.

Keras writes `epoch_loss`/`epoch_accuracy` (and `batch_*`), PyTorch users write `Loss/train` or
`train/loss`, tf.summary users `loss`, older Keras `acc`, and metrics are named after their class
(`sparse_categorical_accuracy`). A tag is split into lower-case words; a tag with the word `loss`
is a loss, one with `accuracy`/`acc` an accuracy, unless a word says it is something else
(a loss scale, a learning rate). Among several, the plainest training tag wins.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final, Literal

Kind = Literal["loss", "accuracy"]

_WORDS = re.compile(r"[a-z0-9]+")
_LOSS_WORDS: Final = frozenset({"loss", "xent", "nll"})
_ACCURACY_WORDS: Final = frozenset({"accuracy", "acc", "top1"})
# Words that make a tag something else even though it contains "loss"/"acc".
_NOT_A_METRIC: Final = frozenset({"scale", "scaler", "rate", "lr", "weight", "weights", "grad"})
# Words that mark a held-out curve; such tags rank after the training one.
_HELD_OUT: Final = frozenset({"val", "validation", "test", "eval", "valid", "dev"})
# Words that only say when a point was written; they do not change what is measured.
_PERIOD: Final = frozenset({"epoch", "batch", "step", "train", "training", "iter"})


def words(tag: str) -> list[str]:
    return _WORDS.findall(tag.lower())


def tag_kind(tag: str) -> Kind | None:
    """'loss', 'accuracy', or None for any other tag."""
    found = set(words(tag))
    if found & _NOT_A_METRIC:
        return None
    if found & _LOSS_WORDS:
        return "loss"
    if found & _ACCURACY_WORDS:
        return "accuracy"
    return None


def _rank(tag: str) -> tuple[int, int, int, str]:
    found = words(tag)
    held_out = int(bool(set(found) & _HELD_OUT))
    # Per-step tags ("loss") are denser than epoch tags ("epoch_loss"): prefer them.
    epoch = int("epoch" in found)
    extra = len([w for w in found if w not in _PERIOD])
    return (held_out, epoch, extra, tag)


def pick_tag(tags: Iterable[str], kind: Kind) -> str | None:
    """The tag that best shows `kind` among `tags`, or None."""
    candidates = [t for t in tags if tag_kind(t) == kind]
    return min(candidates, key=_rank) if candidates else None

