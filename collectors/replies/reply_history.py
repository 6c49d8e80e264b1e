"""Recent replies per channel, kept for the loop check of the simple reply guard.

:meth:`FabricationGuard.check <guardtrace.collectors.replies.fabrication.FabricationGuard.check>`
sees one reply at a time. To tell whether a reply repeats an earlier one it keeps the last
few replies of each channel (a conversation) here, each with its content words computed
once (:func:`~guardtrace.collectors.replies.loops.substance_words`), so a check costs one word
split of the new reply and a few set intersections, however long the history.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .loops import substance_words

__all__ = [
    "HistoryEntry",
    "InMemoryReplyHistory",
    "ReplyHistory",
]


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One earlier reply with its content words, ready to compare.

    A shared store (Redis, ...) may keep only the text and rebuild entries with
    :meth:`from_text`.
    """

    text: str
    words: frozenset[str]

    @classmethod
    def from_text(cls, text: str, words: frozenset[str] | None = None) -> HistoryEntry:
        """Build an entry, reusing ``words`` when the caller already computed them."""
        return cls(text, substance_words(text) if words is None else words)


@runtime_checkable
class ReplyHistory(Protocol):
    """Where the guard keeps the last replies of each channel.

    Implementations must be safe to call from several threads. The default is
    :class:`InMemoryReplyHistory`; a shared one (Redis, a database) lets several agent
    processes see each other's replies on the same channel.
    """

    def recent(self, channel: str) -> Sequence[HistoryEntry]:
        """The channel's most recent replies, oldest first (empty if none)."""
        ...

    def record(self, channel: str, entry: HistoryEntry) -> None:
        """Append ``entry`` as the channel's newest reply."""
        ...


class InMemoryReplyHistory:
    """Per-channel last-N replies in process memory, bounded in channels too.

    Channels are kept in least-recently-used order; recording into a new channel beyond
    ``max_channels`` forgets the channel used longest ago, so a server with many
    conversations holds at most ``max_channels * size`` replies.

    Args:
        size: Replies kept per channel (the "last 3" of tier 3).
        max_channels: Channels kept.

    Raises:
        ValueError: ``size`` or ``max_channels`` is below 1.
    """

    def __init__(self, size: int = 3, max_channels: int = 1000) -> None:
        if size < 1:
            raise ValueError(f"history size must be at least 1, got {size}")
        if max_channels < 1:
            raise ValueError(f"max_channels must be at least 1, got {max_channels}")
        self.size = size
        self.max_channels = max_channels
        self._channels: OrderedDict[str, deque[HistoryEntry]] = OrderedDict()
        self._lock = threading.Lock()

    def recent(self, channel: str) -> tuple[HistoryEntry, ...]:
        """The channel's last ``size`` replies, oldest first; marks the channel used."""
        with self._lock:
            entries = self._channels.get(channel)
            if entries is None:
                return ()
            self._channels.move_to_end(channel)
            return tuple(entries)

    def record(self, channel: str, entry: HistoryEntry) -> None:
        """Append ``entry`` to the channel, evicting the least recently used channel."""
        with self._lock:
            entries = self._channels.get(channel)
            if entries is None:
                entries = self._channels[channel] = deque(maxlen=self.size)
                while len(self._channels) > self.max_channels:
                    self._channels.popitem(last=False)
            else:
                self._channels.move_to_end(channel)
            entries.append(entry)

    def clear(self, channel: str | None = None) -> None:
        """Forget one channel, or every channel when ``channel`` is None."""
        with self._lock:
            if channel is None:
                self._channels.clear()
            else:
                self._channels.pop(channel, None)

    def __len__(self) -> int:
        """How many channels are held."""
        return len(self._channels)

    def __contains__(self, channel: object) -> bool:
        return channel in self._channels
