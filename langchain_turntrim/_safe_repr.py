"""``repr`` that never fails: message content can nest deeper than the
interpreter's recursion limit, a user's object can have a broken ``__repr__``,
and building an error message must not crash on either."""

from __future__ import annotations

from typing import Final

__all__ = ["deep_repr", "safe_repr"]


class _Text(str):
    """Literal output on the work stack (never a value to represent)."""

    __slots__ = ()


class _Leave:
    """Marks the end of a container on the work stack."""

    __slots__ = ("ident",)

    def __init__(self, ident: int) -> None:
        self.ident = ident


_BRACKETS: Final = {
    dict: ("{", "}", "{...}"),
    list: ("[", "]", "[...]"),
    tuple: ("(", ")", "(...)"),
}


def deep_repr(value: object) -> str:
    """``repr(value)`` for nested dicts, lists and tuples of any depth, without recursion.

    Equal to ``repr`` wherever ``repr`` works on such data; a container met
    again inside itself is written ``[...]``/``{...}``, as ``repr`` does.
    """
    out: list[str] = []
    open_ids: set[int] = set()
    stack: list[object] = [value]
    while stack:
        item = stack.pop()
        if type(item) is _Text:
            out.append(item)
            continue
        if type(item) is _Leave:
            open_ids.discard(item.ident)
            continue
        kind = next((k for k in _BRACKETS if isinstance(item, k)), None)
        if kind is None:
            out.append(repr(item))
            continue
        opening, closing, cycle = _BRACKETS[kind]
        if id(item) in open_ids:
            out.append(cycle)
            continue
        open_ids.add(id(item))
        parts: list[object] = [_Text(opening)]
        children: list[object]
        if isinstance(item, dict):
            children = []
            for key, child in item.items():
                children += [_Text(f"{key!r}: "), child]
            step = 2
        else:
            children = list(item)  # type: ignore[call-overload]
            step = 1
        for i in range(0, len(children), step):
            if i:
                parts.append(_Text(", "))
            parts += children[i : i + step]
        if kind is tuple and len(children) == 1:
            parts.append(_Text(","))
        parts += [_Text(closing), _Leave(id(item))]
        stack.extend(reversed(parts))
    return "".join(out)


def safe_repr(value: object, limit: int | None = None) -> str:
    """``repr(value)``, never raising, at most ``limit`` characters (``…`` ends a cut).

    ``deep_repr(value)`` when it nests too deep for ``repr``; when its
    ``__repr__`` raises (or returns a non-str), ``<T object (its repr failed)>``.
    """
    try:
        try:
            text = repr(value)
        except RecursionError:
            text = deep_repr(value)
    except Exception:  # noqa: BLE001 - any failure of a user's __repr__
        text = f"<{type(value).__name__} object (its repr failed)>"
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text
