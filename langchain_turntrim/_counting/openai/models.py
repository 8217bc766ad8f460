"""Which tiktoken encoding an OpenAI model name uses; unknown names are an error."""

from __future__ import annotations

import difflib
from typing import Final

import tiktoken
import tiktoken.model

from langchain_turntrim._safe_repr import safe_repr

__all__ = ["O200K_PREFIXES", "UnknownModelError", "encoding_name_for_model"]

#: Prefixes ChatOpenAI maps to ``o200k_base`` when tiktoken does not know the name.
O200K_PREFIXES: Final = ("gpt-4o", "gpt-4.1", "gpt-5", "gpt-6")


class UnknownModelError(ValueError):
    """A model name no rule maps to an encoding; ``closest`` holds the known
    names it resembles, so the command line can give its own advice."""

    def __init__(self, model: str, closest: list[str]) -> None:
        self.model = model
        self.closest = closest
        super().__init__(
            f"{_unknown(model, closest)}. TiktokenCounter knows the models tiktoken maps, "
            f"{_known_rules()}; for any other model pass its encoding instead, e.g. "
            "TiktokenCounter(encoding='o200k_base')."
        )

    def for_command_line(self) -> str:
        return (
            f"{_unknown(self.model, self.closest)}; tiktoken:MODEL takes the models tiktoken "
            f"maps, {_known_rules()}; for any other model name its encoding instead, e.g. "
            "--token-counter tiktoken:o200k_base"
        )


def encoding_name_for_model(model: str) -> str:
    """The encoding ``ChatOpenAI._get_encoding_model`` picks for ``model``, for
    the names it knows; ``ValueError`` (naming the closest known names) for the
    rest, where ChatOpenAI would guess ``cl100k_base``."""
    try:
        return tiktoken.encoding_name_for_model(model)
    except KeyError:
        pass
    if model.lower().startswith(O200K_PREFIXES):
        return "o200k_base"
    if model.startswith("ft:"):  # ft:BASE:org:suffix:id, a fine-tune of BASE
        base = model[3:].partition(":")[0]
        if base and base != model:
            try:
                return encoding_name_for_model(base)
            except ValueError:
                pass
    close = difflib.get_close_matches(model.lower(), _known_model_names(), n=3, cutoff=0.6)
    raise UnknownModelError(model, close)


def _known_model_names() -> list[str]:
    """The names offered for a misspelt one: GPT-2's never (not a chat model, it
    is only ever meant when named, and ``gpt4`` or ``gpt5`` are not typos of it)."""
    exact = [m for m, e in tiktoken.model.MODEL_TO_ENCODING.items() if e != "gpt2"]
    prefixes = [p.rstrip("-") for p in tiktoken.model.MODEL_PREFIX_TO_ENCODING if ":" not in p]
    return sorted({*exact, *prefixes, *O200K_PREFIXES})


def _unknown(model: str, closest: list[str]) -> str:
    hint = f" (closest known: {', '.join(map(repr, closest))})" if closest else ""
    return f"unknown OpenAI model {safe_repr(model, 80)}{hint}"


def _known_rules() -> str:
    return f"names starting with {', '.join(O200K_PREFIXES)}, and 'ft:' fine-tunes of those"
