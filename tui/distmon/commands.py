"""The dashboard's choices in Textual's command palette, with its fuzzy search.

`t`, `s` and `g` open the palette on one list (tags, sort columns, group columns); ctrl+p opens
it on every choice the dashboard has (those, the comparison columns and the x axis), as
posting's command palette does. Tags and columns come from logdirs: each is shown escaped and
told apart as everywhere (distcore.textsafe.shown_names) and is never read as markup (Textual's
own SimpleProvider reads a command's name as markup, so a tag named `[b]` would not show as
written or would raise).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from textual.command import CommandPalette, DiscoveryHit, Hit, Hits, Matcher, Provider
from textual.content import Content

from distcore.textsafe import shown_names

NAME_LIMIT = 60  # characters of a tag or column shown in the palette


@dataclass(frozen=True)
class Choice:
    name: str  # shown as plain text (already escaped)
    run: Callable[[], None]
    help: str | None = None  # our own words only: Textual reads it as markup


def choices(prefix: str, values: Sequence[str], pick: Callable[[str], None],
            help: str | None = None, first: Iterable[Choice] = ()) -> list[Choice]:
    """One choice per value, `prefix` then the value escaped and told apart."""
    names = shown_names(values, NAME_LIMIT)
    made = [*first]
    made += [Choice(f"{prefix}{names[v]}", _bound(pick, v), help) for v in values]
    return made


def _bound(pick: Callable[[str], None], value: str) -> Callable[[], None]:
    return lambda: pick(value)


def highlighted(matcher: Matcher, name: str) -> Content:
    """`name` as plain Content with the matched characters styled (Matcher.highlight would
    read the name as markup)."""
    content = Content(name)
    score, offsets = matcher.fuzzy_search.match(matcher.query, name)
    if not score:
        return content
    style = matcher.match_style
    for offset in offsets:
        if not name[offset].isspace():
            content = content.stylize(style, offset, offset + 1)
    return content


def hits(matcher: Matcher, listed: Iterable[Choice]) -> list[Hit]:
    found = []
    for choice in listed:
        score = matcher.match(choice.name)
        if score > 0:
            found.append(Hit(score, highlighted(matcher, choice.name), choice.run,
                             text=choice.name, help=choice.help))
    return found


class ChoiceList(Provider):
    """A provider of one fixed list (what `t`, `s` and `g` show): `listed` makes the class."""

    LISTED: Sequence[Choice] = ()

    @classmethod
    def listed(cls, choices: Sequence[Choice]) -> type[ChoiceList]:
        # The palette builds its providers from classes, with the screen.
        return type("Choices", (cls,), {"LISTED": tuple(choices)})

    async def search(self, query: str) -> Hits:
        for hit in hits(self.matcher(query), self.LISTED):
            yield hit

    async def discover(self) -> Hits:
        for choice in self.LISTED:
            yield DiscoveryHit(Content(choice.name), choice.run, text=choice.name,
                               help=choice.help)


def palette(listed: Sequence[Choice], placeholder: str) -> CommandPalette:
    return CommandPalette(providers=[ChoiceList.listed(listed)], placeholder=placeholder)


class DashboardCommands(Provider):
    """ctrl+p: every choice of the dashboard (its screen's `dashboard_choices`)."""

    def _listed(self) -> Sequence[Choice]:
        made: Callable[[], Sequence[Choice]] | None = getattr(
            self.screen, "dashboard_choices", None
        )
        return made() if made is not None else ()

    async def search(self, query: str) -> Hits:
        for hit in hits(self.matcher(query), self._listed()):
            yield hit

    async def discover(self) -> Hits:
        for choice in self._listed():
            yield DiscoveryHit(Content(choice.name), choice.run, text=choice.name,
                               help=choice.help)
