"""``HistoryMemo``: the histories an additive planner planned last, so that a
history that only grew since is counted and grouped in O(new messages).

An agent trims before every model call, and between two calls its history
only grows: the same message objects, plus the newest step. The memo keeps,
for each of the last few histories planned (from their second plan on), its
messages, the fields each
count was made from (``message_fields``) and the ``Grouping`` of all of them
(their kinds and costs included). A history that starts with one of those, message
for message (the same objects, whose counted fields are still the same
objects, of the same kinds), is planned by counting and grouping only the
messages after it. Anything else (a message replaced, removed or inserted, a
field reassigned) is planned from scratch, through the per-message caches.

The check of the remembered prefix is by identity: each message is the
remembered object, and each of its counted fields too. It misses a nested
value edited in place (assign a new value, or call ``clear()``), and nothing
else a count depends on.

With a caching counter (``caches``), the messages a remembered history gains
are counted without the cache (new messages would only miss, and making
their keys means digesting their fields); their counts are filed there when
a plan may look them up: a history planned from scratch (a message changed,
a checkpoint restored, a thread forked), an entry pushed out, a compaction.

Beside each history are the compactions made of it as it is
(``_compaction.memo``): ``planned`` gives them to the compaction that follows
a plan, when that plan found the history unchanged. They go whenever the
history gains messages, or its entry is dropped.
"""

from __future__ import annotations

import operator
import threading
import weakref
from collections.abc import Callable, Sequence
from itertools import chain
from typing import Any, Final

from langchain_core.messages import BaseMessage

from langchain_turntrim._calls import Calls, unanswered_calls, with_unanswered
from langchain_turntrim._compaction.memo import Compactions
from langchain_turntrim._core import Grouping, TrimPlan, check_kinds, plan_costs
from langchain_turntrim._core.depth import Cut
from langchain_turntrim._core.newest import plan_newest
from langchain_turntrim._counting.additive import AdditiveCounter
from langchain_turntrim._counting.keys import Fields, read_fields
from langchain_turntrim._messages import check_messages, message_kinds

__all__ = ["HISTORIES", "HistoryMemo"]

#: How many histories a memo remembers (the most recently planned ones).
HISTORIES: Final = 8

Getter = Callable[[dict[str, Any]], tuple[Any, ...]]
#: Checked per-message counts of messages whose ``message_fields`` were read
#: (``AdditiveCounter.costs_of``).
Count = Callable[[Sequence[BaseMessage], Sequence[Fields]], list[int]]
#: Counts not in the counter's cache yet: the messages' classes, their fields, the counts.
Unfiled = tuple[list[type], Sequence[Fields], list[int]]


def _dead() -> None:
    """What a weak reference to no entry gives."""


class _Entry:
    """One remembered history. An entry is used by one call at a time: a call
    takes it out of the memo, extends it in place and puts it back."""

    __slots__ = (
        "__weakref__",
        "calls",
        "classes",
        "compactions",
        "grouping",
        "messages",
        "unfiled",
    )

    def __init__(self) -> None:
        self.messages: list[BaseMessage] = []
        #: The compactions made of this history as it is (see ``_compaction.memo``).
        self.compactions = Compactions()
        #: For each fields getter (one per message class): its messages, and
        #: their counted fields one after the other.
        self.classes: dict[Getter, tuple[list[BaseMessage], list[Any]]] = {}
        self.grouping = Grouping()
        self.calls = Calls()
        #: Counts made without the counter's cache (``deferred``), to ``file``
        #: when a lookup may want them: each batch's classes, fields and counts.
        self.unfiled: list[Unfiled] = []

    def matches(self, messages: Sequence[BaseMessage], kinds: list[int] | None) -> bool:
        """Whether ``messages`` (of turn kinds ``kinds``, when given) start with this history."""
        known = self.messages
        is_ = operator.is_
        if not all(map(is_, known, messages)):
            return False
        if kinds is not None and self.grouping.kinds != kinds[: len(known)]:
            return False
        # The same objects, hence the same classes and getters: each class's
        # current fields line up with the remembered ones, read in C.
        fields_of = chain.from_iterable
        return all(
            all(map(is_, fields_of(map(getter, map(vars, group))), fields))
            for getter, (group, fields) in self.classes.items()
        )

    def deferred(self, counter: AdditiveCounter) -> Count:
        """``counter.costs_of`` without its cache, the counts noted as ``unfiled``:
        the messages an agent's history gained since its last plan are new, so
        looking them up would only miss, and this entry checks them by identity."""

        def count(messages: Sequence[BaseMessage], fields: Sequence[Fields]) -> list[int]:
            costs = counter.costs_of(messages, fields, cached=False)
            self.unfiled.append((list(map(type, messages)), fields, costs))
            return costs

        return count

    def take_unfiled(self) -> list[Unfiled]:
        """The ``unfiled`` counts, which are no longer this entry's."""
        unfiled, self.unfiled = self.unfiled, []
        return unfiled

    def file(self, counter: AdditiveCounter) -> None:
        """File the ``unfiled`` counts in ``counter``'s cache (each was made from
        the fields it is filed under, whatever changed since)."""
        _file(counter, self.take_unfiled())

    def extend(
        self, messages: Sequence[BaseMessage], kinds: list[int] | None, count: Count
    ) -> None:
        """Count, classify (unless ``kinds`` are given) and group ``messages``
        after the remembered ones.

        Fields are read once, before counting, and the counts are made from
        them: if another thread reassigns one meanwhile, the remembered fields
        are the older ones, and the next call sees the change and counts again.
        """
        if not messages:
            return
        try:
            getters, fields = read_fields(messages, range(len(messages)))
        except TypeError:
            check_messages(messages)  # names the item
            raise
        if kinds is None:
            kinds = message_kinds(messages)
        costs = count(messages, fields)
        self.compactions = Compactions()
        self.grouping.extend(kinds, costs)
        self.calls.feed(messages, kinds)
        self.messages.extend(messages)
        classes = self.classes
        for getter, message, read in zip(getters, messages, fields, strict=True):
            group = classes.get(getter)
            if group is None:
                group = classes[getter] = ([], [])
            group[0].append(message)
            group[1].extend(read)


def _file(counter: AdditiveCounter, unfiled: list[Unfiled]) -> None:
    for classes, fields, counts in unfiled:
        counter.file(classes, fields, counts)


def cold_plan(
    messages: Sequence[BaseMessage],
    kinds: Sequence[int],
    counter: AdditiveCounter,
    max_tokens: int,
    overhead: int,
    trim_to: int | Cut | None,
) -> TrimPlan:
    """The plan of a history no planner remembers. With the spec's cut it is
    counted newest-first, only what the plan reads (``plan_newest``: the
    other figures are counted when read); else every message is counted."""
    if trim_to is not None:
        plan = plan_costs(kinds, counter.costs(messages), max_tokens, overhead, trim_to)
        return unanswered_calls(plan, messages, kinds)

    def count_at(indices: Sequence[int]) -> list[int]:
        if type(indices) is range:  # the usual chunk: a run of messages
            chosen = list(messages[indices.start : indices.stop])
        else:
            chosen = list(map(messages.__getitem__, indices))
        try:
            return counter.costs(chosen)
        except (TypeError, ValueError):
            counter.costs(messages)  # errors name a message by its index in the history
            raise

    plan = plan_newest(kinds, count_at, max_tokens, overhead)
    return unanswered_calls(plan, messages, kinds)


class HistoryMemo:
    """The last ``HISTORIES`` histories planned (each of at most ``max_messages``
    messages), for ``AdditivePlanner``.

    A list of at most ``HISTORIES`` entries, the most recent first, rather
    than an ``LRU``: a history is found by the remembered one it starts with
    (the same last message at the same place), not by a key.

    A history is remembered from the second time it (or an older version of
    it) is planned: the first time, only its last message is noted. So
    histories that are never planned again (loaded afresh from a store for
    each call, trimmed once by ``trim_turns``) cost nothing more than before.
    The memo holds the remembered histories' messages (and their counted
    fields, and their compactions) until newer histories push them out or
    ``clear()`` is called.
    Thread-safe: concurrent calls on different histories each use their own
    entry.
    """

    __slots__ = ("_entries", "_local", "_lock", "_sightings", "max_messages")

    def __init__(self, max_messages: int) -> None:
        self.max_messages = max_messages
        self._entries: list[_Entry] = []  # the most recent first
        #: ``entry``: a weak reference to the entry this thread's last plan
        #: used, whose messages it checked (``planned``, a plan ``again``).
        self._local = threading.local()
        #: (last message, length) of the histories planned once, the most recent first.
        self._sightings: list[tuple[BaseMessage, int]] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Number of histories remembered."""
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._sightings.clear()

    def plan(
        self,
        messages: Sequence[BaseMessage],
        kinds: Sequence[int] | None,
        counter: AdditiveCounter,
        max_tokens: int,
        overhead: int,
        trim_to: int | Cut | None,
        *,
        again: bool = False,
    ) -> TrimPlan:
        """The plan of ``messages``: counted (by ``counter``) and grouped only
        after the most recent remembered history they start with, if any.
        ``again``: they are the very list this thread's previous plan was just
        given (``Planner.plan``): the history it left remembered, whose fields
        it checked, is planned without checking them again."""
        if kinds is not None:
            kinds = check_kinds(kinds, len(messages))
        entry = self._take_checked(messages) if again else None
        if entry is None:
            self._local.entry = _dead
            entry = self._grown(messages, kinds, counter)
            if entry is None:  # not planned before: noted, and counted afresh
                kinds = message_kinds(messages) if kinds is None else kinds
                self._sight(messages)
                return cold_plan(messages, kinds, counter, max_tokens, overhead, trim_to)
        plan = with_unanswered(
            entry.grouping.plan(max_tokens, overhead, trim_to), entry.calls.of_request()
        )
        self._put(entry, counter)
        self._local.entry = weakref.ref(entry)
        return plan

    def _grown(
        self, messages: Sequence[BaseMessage], kinds: list[int] | None, counter: AdditiveCounter
    ) -> _Entry | None:
        """The remembered history ``messages`` start with, taken out of the
        memo and extended with their newer messages (a new one when they
        start with none but were planned before); None when they were not
        planned before."""
        entry = self._take(messages)
        if entry is not None and not entry.matches(messages, kinds):
            entry.file(counter)  # for the messages that did not change
            entry = None  # a message changed: this history is planned from scratch
        start = 0 if entry is None else len(entry.messages)
        if entry is None:
            # Counted through the cache: the counts an entry did not file may be wanted
            # (a history restored from a checkpoint, a thread forked from another).
            self.file_all(counter)
            if not self._sighted(messages):
                return None
            check_messages(messages)
            entry = _Entry()
        try:
            entry.extend(
                messages[start:],
                None if kinds is None else kinds[start:],
                entry.deferred(counter) if start and counter.caches else counter.costs_of,
            )
        except (TypeError, ValueError):
            if not start:
                raise
            # Errors name messages by index: go through the whole list for the right one.
            entry.file(counter)
            entry = _Entry()
            entry.extend(messages, kinds, counter.costs_of)
        return entry

    def _take_checked(self, messages: Sequence[BaseMessage]) -> _Entry | None:
        """Take out of the memo the entry whose messages this thread's last
        plan checked, if it remembers exactly ``messages`` (the same objects,
        as many): another thread may have taken it, grown it or dropped it."""
        last: _Entry | None = getattr(self._local, "entry", _dead)()
        if last is None:
            return None
        with self._lock:
            if last not in self._entries:
                return None
            known = last.messages
            if len(known) != len(messages) or not all(map(operator.is_, known, messages)):
                return None
            self._entries.remove(last)
        return last

    def planned(self, messages: Sequence[BaseMessage]) -> Compactions | None:
        """The compactions of ``messages`` as this thread's last plan found
        them (every message, its counted fields unchanged), if it was of them."""
        entry: _Entry | None = getattr(self._local, "entry", _dead)()
        if entry is None or len(entry.messages) != len(messages):
            return None
        return entry.compactions if all(map(operator.is_, entry.messages, messages)) else None

    def _take(self, messages: Sequence[BaseMessage]) -> _Entry | None:
        """Take out of the memo the most recent history ``messages`` may start
        with (same length or shorter, same last message)."""
        size = len(messages)
        with self._lock:
            for i, entry in enumerate(self._entries):
                n = len(entry.messages)
                if n <= size and (not n or entry.messages[n - 1] is messages[n - 1]):
                    return self._entries.pop(i)
        return None

    def _sighted(self, messages: Sequence[BaseMessage]) -> bool:
        """Whether ``messages`` start with a history planned once (which is then
        no longer noted: it is about to be remembered)."""
        size = len(messages)
        with self._lock:
            for i, (last, n) in enumerate(self._sightings):
                if n <= size and messages[n - 1] is last:
                    del self._sightings[i]
                    return True
        return False

    def _sight(self, messages: Sequence[BaseMessage]) -> None:
        if not messages or len(messages) > self.max_messages:
            return
        with self._lock:
            sightings = self._sightings
            sightings.insert(0, (messages[-1], len(messages)))
            del sightings[HISTORIES:]

    def _put(self, entry: _Entry, counter: AdditiveCounter) -> None:
        """Remember ``entry`` (the most recent); the unfiled counts of an entry
        pushed out (or of ``entry``, if too long) are filed in ``counter``."""
        if not entry.messages or len(entry.messages) > self.max_messages:
            entry.file(counter)
            return
        with self._lock:
            entries = self._entries
            entries.insert(0, entry)
            gone = entries[HISTORIES:]
            del entries[HISTORIES:]
        for old in gone:
            old.file(counter)

    def file_all(self, counter: AdditiveCounter) -> None:
        """File every remembered entry's unfiled counts in ``counter``'s cache
        (before counting through it: a compaction, a history planned afresh)."""
        with self._lock:
            batches = [entry.take_unfiled() for entry in self._entries if entry.unfiled]
        for unfiled in batches:
            _file(counter, unfiled)

    def __reduce__(self) -> tuple[Any, ...]:
        """Copies and pickles start empty (a lock cannot be copied)."""
        return (type(self), (self.max_messages,))
