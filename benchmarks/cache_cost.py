"""What the prompt cache makes a trim cost: ``trim_to`` fixed, ``"auto"`` and
``"auto"`` timed to the cache, against the greedy trim, in money.

Not a timing. Recorded conversations are joined into one long history (as in
``stable_prefix``) and replayed through ``TurnTrimMiddleware.wrap_model_call``
before each assistant message (one model call), with simulated idle gaps on
a fake clock: 1-20 s before a tool step, 10 s to 15 min before a user's next
message, 2 min to 3 h before a new conversation (log-uniform, seeded). The
fake model's provider keeps one cache entry, the previous request, for the
TTL: a call reads the common prefix with it (when at least the cacheable
minimum) and writes the rest; it reports both in ``usage_metadata``, as
LangChain's chat models do.

Per arm and price profile (Anthropic 5-minute and 1-hour rules, OpenAI
GPT-4.1's): the input cost in base input prices, the context given up
against the greedy trim (a token worth its base price: ``context_value``),
their sum, cache busts, mean context kept, calls over budget, and warm calls
whose cut moved although the previous cut still fit.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, convert_to_messages

from benchmarks.long_turns import DATA
from benchmarks.report import Row, Target
from benchmarks.scenarios import Settings
from langchain_turntrim import ApproximateCounter, TurnTrimMiddleware

__all__ = ["Profile", "cache_cost", "replay"]

INPUTS: Final = (("tau-bench-gpt4o-airline.json", 40), ("tau2-retail-gpt-4.1.json", 40))
BUDGETS: Final = (8_000, 16_000)
FRACTIONS: Final = (0.5, 0.6, 0.75, 0.9)
SEED: Final = 0


@dataclass(frozen=True)
class Profile:
    """A provider's cache as the fake model simulates it, and what the request names."""

    name: str
    model: str
    settings: dict[str, Any]
    read: float
    write: float
    ttl: float
    reports_writes: bool


PROFILES: Final = (
    Profile("Anthropic 5m", "claude-sonnet-4-5", {}, 0.1, 1.25, 300.0, reports_writes=True),
    Profile(
        "Anthropic 1h",
        "claude-sonnet-4-5",
        {"cache_control": {"type": "ephemeral", "ttl": "1h"}},
        0.1,
        2.0,
        3600.0,
        reports_writes=True,
    ),
    Profile("OpenAI", "gpt-4.1", {}, 0.25, 1.0, 300.0, reports_writes=False),
)
MIN_PREFIX: Final = 1024


class _Model:
    """What a request names: only the model's name is read."""

    def __init__(self, name: str) -> None:
        self.model_name = name


@dataclass
class Result:
    """One arm's replay."""

    calls: int
    input_cost: float
    kept: list[int]
    busts: int
    over_budget: int
    needless_moves: int

    def given_up(self, greedy: Result) -> float:
        return float(sum(max(0, g - k) for g, k in zip(greedy.kept, self.kept, strict=True)))

    def mean_kept(self) -> float:
        return sum(self.kept) / len(self.kept)


def history(name: str, count: int) -> tuple[list[BaseMessage], set[int]]:
    """The first ``count`` conversations joined (one system message, every
    message with an id), and the indices where a conversation starts."""
    data = json.loads((DATA / name).read_text(encoding="utf-8"))[:count]
    joined: list[dict[str, object]] = []
    starts: set[int] = set()
    for conversation in data:
        items = conversation["traj"] if isinstance(conversation, dict) else conversation
        starts.add(len(joined) + (1 if not joined else 0))
        for item in items:
            if item["role"] == "system" and joined:
                continue
            joined.append({**item, "content": item.get("content") or "", "id": f"m{len(joined)}"})
    return convert_to_messages(joined), starts


def gaps(messages: Sequence[BaseMessage], starts: set[int], seed: int = SEED) -> list[float]:
    """The idle seconds before each message's model call (seeded, log-uniform)."""
    rng = random.Random(seed)

    def between(low: float, high: float) -> float:
        return math.exp(rng.uniform(math.log(low), math.log(high)))

    found: list[float] = []
    conversation = False
    for i, message in enumerate(messages):
        conversation = conversation or i in starts
        if message.type == "human":
            found.append(between(120, 10_800) if conversation else between(10, 900))
            conversation = False
        else:
            found.append(between(1, 20))
    return found


class _Provider:
    """The fake model's provider: one cache entry, the previous request, for the TTL."""

    def __init__(self, profile: Profile, tokens: dict[str | None, int], now: list[float]) -> None:
        self.profile, self.tokens, self.now = profile, tokens, now
        self.cache: list[BaseMessage] = []
        self.cached_at = -math.inf
        self.cost = 0.0
        self.sent: list[BaseMessage] = []

    def __call__(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        profile, tokens = self.profile, self.tokens
        sent: list[BaseMessage] = [request.system_message, *request.messages]  # type: ignore[list-item]
        size = sum(tokens[m.id] for m in sent)
        hit = 0
        if self.now[0] - self.cached_at <= profile.ttl:
            for a, b in zip(sent, self.cache, strict=False):
                if a is not b:
                    break
                hit += tokens[a.id]
        hit = hit if hit >= MIN_PREFIX else 0
        written = size - hit if size >= MIN_PREFIX else 0
        self.cost += hit * profile.read + written * profile.write + (size - hit - written)
        self.cache, self.cached_at, self.sent = sent, self.now[0], sent
        details = {"cache_read": hit}
        if profile.reports_writes:
            details["cache_creation"] = written
        usage = {
            "input_tokens": size,
            "output_tokens": 0,
            "total_tokens": size,
            "input_token_details": details,
        }
        return ModelResponse(result=[AIMessage("", usage_metadata=usage)])


def replay(
    messages: Sequence[BaseMessage],
    wait: Sequence[float],
    profile: Profile,
    budget: int,
    **options: Any,
) -> Result:
    """The history replayed through the middleware, one model call before each
    assistant message, on the fake clock and the simulated cache."""
    tokens = {
        m.id: t for m, t in zip(messages, ApproximateCounter().count_each(messages), strict=True)
    }
    now = [0.0]
    middleware = TurnTrimMiddleware(budget, clock=lambda: now[0], **options)
    provider = _Provider(profile, tokens, now)
    system = messages[0]
    model = _Model(profile.model)
    kept: list[int] = []
    busts = over = needless = 0
    previous: list[BaseMessage] = []
    previous_time = -math.inf
    for i, message in enumerate(messages):
        now[0] += wait[i]
        if not isinstance(message, AIMessage):
            continue
        request = ModelRequest(
            model=model,  # type: ignore[arg-type]
            messages=list(messages[1:i]),  # type: ignore[arg-type]
            system_message=system,  # type: ignore[arg-type]
            tools=[],
            model_settings=dict(profile.settings),
        )
        middleware.wrap_model_call(request, provider)
        sent = provider.sent
        size = sum(tokens[m.id] for m in sent)
        kept.append(size - tokens[system.id])
        over += size > budget
        first = sent[1] if len(sent) > 1 else None
        was = previous[1] if len(previous) > 1 else None
        if was is not None and first is not was:
            busts += 1
            if now[0] - previous_time <= profile.ttl:  # warm: was the move forced?
                start = next(k for k, m in enumerate(messages) if m is was)
                held = sum(tokens[m.id] for m in messages[start:i]) + tokens[system.id]
                needless += held <= budget
        previous, previous_time = sent, now[0]
    return Result(len(kept), provider.cost, kept, busts, over, needless)


def cache_cost(settings: Settings) -> list[Row]:
    """Every arm, profile, input and budget; the issue's targets as rows."""
    if not all((DATA / name).exists() for name, _ in INPUTS):
        reason = "the recorded conversations are not beside the repository"
        return [Row("cache-cost", "skipped: no data", None, skipped=reason)]
    rows: list[Row] = []
    for name, count in INPUTS:
        messages, starts = history(name, count // 4 if settings.quick else count)
        wait = gaps(messages, starts)
        label = name.split("-", maxsplit=1)[0]
        for budget in BUDGETS:
            kept: dict[str, float] = {}
            for profile in PROFILES:
                found, auto = _profile_rows(label, budget, profile, messages, wait)
                rows.extend(found)
                kept[profile.name] = auto.mean_kept()
            rows.append(
                Row(
                    "cache-cost",
                    f"{label} {budget // 1000}k: auto mean context kept, 1h / 5m rules",
                    Target("<=", 0.99),
                    kept["Anthropic 1h"] / kept["Anthropic 5m"],
                )
            )
    return rows


def _profile_rows(
    label: str,
    budget: int,
    profile: Profile,
    messages: Sequence[BaseMessage],
    wait: Sequence[float],
) -> tuple[list[Row], Result]:
    def run(**options: Any) -> Result:
        return replay(messages, wait, profile, budget, **options)

    greedy = run()
    fixed = {f: run(trim_to=int(f * budget)) for f in FRACTIONS}
    auto = run(trim_to="auto", time_to_cache=False)
    timed = run(trim_to="auto")

    def total(result: Result) -> float:
        return result.input_cost + result.given_up(greedy)

    best_fraction = min(fixed, key=lambda f: total(fixed[f]))
    best = fixed[best_fraction]
    head = f"{label} {budget // 1000}k, {profile.name}"
    arms = {"greedy": greedy, **{f"trim_to {f:g}": r for f, r in fixed.items()}}
    arms |= {"auto": auto, "auto timed": timed}
    note = "; ".join(
        f"{arm}: input {r.input_cost:,.0f}, total {total(r):,.0f}, busts {r.busts}, "
        f"kept {r.mean_kept() / greedy.mean_kept():.0%}"
        for arm, r in arms.items()
    )
    details = {
        arm: {
            "input_cost": r.input_cost,
            "total_cost": total(r),
            "busts": r.busts,
            "mean_kept": r.mean_kept(),
            "over_budget": r.over_budget,
            "needless_moves": r.needless_moves,
        }
        for arm, r in arms.items()
    }
    rows = [
        Row(
            "cache-cost",
            f"{head}: auto total / best fixed ({best_fraction:g})",
            Target("<=", 1.05),
            total(auto) / total(best),
            notes=[f"{head}: {auto.calls} calls; {note}"],
            details=details,
        ),
        Row(
            "cache-cost",
            f"{head}: mean context kept, auto timed / greedy",
            Target(">=", 0.85, percent=True),
            timed.mean_kept() / greedy.mean_kept(),
        ),
        Row(
            "cache-cost",
            f"{head}: calls over budget (any arm) or moved while warm and fitting (timed)",
            Target("<=", 0, percent=True),
            (sum(r.over_budget for r in arms.values()) + timed.needless_moves) / timed.calls,
        ),
    ]
    if profile.name == "Anthropic 5m":
        rows += [
            Row(
                "cache-cost",
                f"{head}: greedy / auto input",
                Target(">=", 1.6),
                greedy.input_cost / auto.input_cost,
            ),
            Row(
                "cache-cost",
                f"{head}: greedy / auto timed input",
                Target(">=", 2.0),
                greedy.input_cost / timed.input_cost,
            ),
            Row(
                "cache-cost",
                f"{head}: auto / auto timed input",
                Target(">=", 1.1),
                auto.input_cost / timed.input_cost,
            ),
        ]
    elif profile.name == "Anthropic 1h":
        rows.append(
            Row(
                "cache-cost",
                f"{head}: auto / auto timed input",
                Target(">=", 1.05),
                auto.input_cost / timed.input_cost,
            )
        )
    else:
        rows.append(
            Row(
                "cache-cost",
                f"{head}: auto timed / auto input",
                Target("<=", 1.0),
                timed.input_cost / auto.input_cost,
            )
        )
    return rows, auto
