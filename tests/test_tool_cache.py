"""Remembered tool prices: a hit always says what a fresh conversion says."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool, StructuredTool, tool
from pydantic import BaseModel, Field

from langchain_turntrim import TiktokenCounter, TurnTrimMiddleware, per_list, per_message
from langchain_turntrim._counting import AdditiveCounter, ResolvedCounter, resolve_counter
from langchain_turntrim._counting import tools as tool_prices
from langchain_turntrim._counting.tools import tool_key, tools_key
from tests.helpers import arun

LONG = " It also explains every field of the result in a long, careful sentence." * 8


@tool
def lookup(query: str) -> str:
    """Look a query up in the knowledge base."""
    return query


@tool
def weather(city: str, unit: str = "celsius") -> str:
    """The weather in a city."""
    return city + unit


class Query(BaseModel):
    query: str = Field(description="what to look for")
    limit: int = Field(default=10, description="how many results at most")


def openai_tool() -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": "book",
            "description": "Book a flight.",
            "parameters": {
                "type": "object",
                "properties": {
                    "flight": {"type": "string", "description": "the flight number"},
                    "cabin": {"type": "string", "enum": ["economy", "business"]},
                    "bags": {"type": "integer", "default": 1},
                },
                "required": ["flight"],
            },
        },
    }


COUNTERS: dict[str, Callable[[], ResolvedCounter]] = {
    "approximate": lambda: resolve_counter("approximate"),
    "tiktoken": lambda: resolve_counter(TiktokenCounter("gpt-4")),
    "per_message": lambda: resolve_counter(per_message(lambda m: len(str(m.content)))),
    "per_list": lambda: resolve_counter(per_list(lambda ms: sum(len(str(m.content)) for m in ms))),
}


@pytest.fixture(autouse=True)
def _nothing_remembered() -> Iterator[None]:
    tool_prices._PRICES.clear()
    yield
    tool_prices._PRICES.clear()


@pytest.fixture(params=list(COUNTERS))
def counter(request: pytest.FixtureRequest, tiktoken_cache: Any) -> ResolvedCounter:
    return COUNTERS[request.param]()


#: The request a whole-list counter prices tools beside.
REQUEST = [HumanMessage("What is the weather?")]


def price(counter: ResolvedCounter, tools: list[Any]) -> int:
    """What ``tools`` add to a request, as the counter counts them."""
    if isinstance(counter, AdditiveCounter):
        return counter.count_tools(tools)
    return counter.count(REQUEST, tools) - counter.count(REQUEST)


def fresh(counter: ResolvedCounter, tools: list[Any]) -> int:
    """What the counter says with nothing remembered (the prices emptied, the tools copied)."""
    tool_prices._PRICES.clear()
    return price(counter, copy.deepcopy(tools))


def changed(counter: ResolvedCounter, tools: list[Any], change: Callable[[], object]) -> None:
    """Count ``tools`` (remembered), ``change`` them, count again: the count is a
    fresh one, and differs from the first (the change matters)."""
    before = price(counter, tools)
    assert price(counter, tools) == before  # a hit
    change()
    after = price(counter, tools)
    assert after == fresh(counter, tools)
    assert after != before


# -- the list and the tools in it ----------------------------------------------------


def test_a_changed_tool_list_is_counted_afresh(counter: ResolvedCounter) -> None:
    tools: list[Any] = [lookup]
    changed(counter, tools, lambda: tools.append(weather))
    changed(counter, tools, lambda: tools.append(openai_tool()))
    changed(counter, tools, lambda: tools.pop(0))
    tools.reverse()
    assert price(counter, tools) == fresh(counter, tools)


def test_a_tool_replaced_by_one_of_the_same_name_is_counted_afresh(
    counter: ResolvedCounter,
) -> None:
    twin = StructuredTool.from_function(
        lambda query: query, name="lookup", description="Look a query up." + LONG
    )
    tools: list[Any] = [lookup, weather]
    changed(counter, tools, lambda: tools.__setitem__(0, twin))


def test_reassigned_tool_fields_are_counted_afresh(counter: ResolvedCounter) -> None:
    mine = StructuredTool.from_function(
        lambda query: query, name="search", description="Search.", args_schema=Query
    )
    tools: list[Any] = [mine]
    changed(counter, tools, lambda: setattr(mine, "description", "Search." + LONG))
    changed(counter, tools, lambda: setattr(mine, "name", "search_the_whole_knowledge_base"))
    changed(counter, tools, lambda: setattr(mine, "args_schema", weather.args_schema))


def test_a_dict_args_schema_mutated_in_place_is_counted_afresh(counter: ResolvedCounter) -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    mine = StructuredTool.from_function(
        lambda q: q, name="search", description="Search.", args_schema=schema
    )
    properties: dict[str, Any] = schema["properties"]  # type: ignore[assignment]
    changed(counter, [mine], lambda: properties.update(page={"type": "integer"}))


def test_a_dict_tool_mutated_in_place_is_counted_afresh(counter: ResolvedCounter) -> None:
    schema = openai_tool()
    function = schema["function"]
    properties = function["parameters"]["properties"]
    tools: list[Any] = [schema, lookup]
    changed(counter, tools, lambda: properties["flight"].update(description="the flight" + LONG))
    changed(counter, tools, lambda: properties["cabin"]["enum"].append("first class suite"))
    changed(counter, tools, lambda: function.update(description="Book." + LONG))


def test_a_dict_tool_reassigned_is_counted_afresh(counter: ResolvedCounter) -> None:
    schema = openai_tool()
    other = openai_tool()
    other["function"]["name"] = "book_a_flight_with_every_option_and_seat_preference"
    tools: list[Any] = [schema]
    changed(counter, tools, lambda: schema.update(function=other["function"]))
    tools2: list[Any] = [openai_tool()]
    changed(counter, tools2, lambda: tools2.__setitem__(0, other))


def test_values_equal_in_python_but_written_differently_are_told_apart(tiktoken_cache: Any) -> None:
    counter = resolve_counter(TiktokenCounter("gpt-4"))
    schema = openai_tool()
    bags = schema["function"]["parameters"]["properties"]["bags"]
    cabin = schema["function"]["parameters"]["properties"]["cabin"]
    # "default:1" and "default:1.0" are different texts; the pricer reads only list enums.
    changed(counter, [schema], lambda: bags.update(default=1.0))
    changed(counter, [schema], lambda: cabin.update(enum=tuple(cabin["enum"])))
    for a, b in [(1, 1.0), (1, True), (0.0, -0.0), ([1], (1,)), ({1: "a"}, {"1": "a"})]:
        assert tool_key({"x": a}) != tool_key({"x": b})


# -- what is never remembered --------------------------------------------------------


class Shifting(BaseTool):
    """A tool class with its own schema property: not known to the remembered prices."""

    name: str = "shifting"
    description: str = "A tool whose schema changes."
    fields: list[str] = Field(default_factory=lambda: ["a"])

    @property
    def tool_call_schema(self) -> Any:
        properties = {f: {"type": "string"} for f in self.fields}
        return {"type": "object", "properties": properties}

    def _run(self, *args: Any, **kwargs: Any) -> str:
        return ""


def test_a_tool_class_with_its_own_schema_is_converted_on_every_call(
    counter: ResolvedCounter,
) -> None:
    shifting = Shifting()
    assert tool_key(shifting) is None
    assert tools_key([lookup, shifting]) is None
    changed(counter, [lookup, shifting], lambda: shifting.fields.extend(["b" * 40, "c" * 40]))


def test_values_a_digest_cannot_key_make_a_tool_unremembered(counter: ResolvedCounter) -> None:
    class Note(str):
        __slots__ = ()

    schema = openai_tool()
    schema["function"]["description"] = Note("Book a flight.")
    assert tool_key(schema) is None
    assert price(counter, [schema]) == fresh(counter, [schema])
    odd = StructuredTool.from_function(
        lambda q: q, name="odd", description="Odd.", metadata={"owner": object()}
    )
    assert tool_key(odd) is None
    assert tool_key(lambda q: q) is None
    assert tool_key(Query) is None


def test_the_remembered_prices_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tool_prices._PRICES, "maxsize", 3)
    counter = resolve_counter("approximate")
    for i in range(10):
        schema = openai_tool()
        schema["function"]["name"] = f"tool_{i}"
        price(counter, [schema])
    assert len(tool_prices._PRICES) == 3


# -- through the middleware, sync and async ------------------------------------------


def _call(middleware: TurnTrimMiddleware, request: Any, mode: str) -> Any:
    seen: list[Any] = []

    def handler(sent: Any) -> Any:
        seen.append(sent)
        return ModelResponse(result=[AIMessage("ok")])

    async def ahandler(sent: Any) -> Any:
        return handler(sent)

    if mode == "sync":
        middleware.wrap_model_call(request, handler)
    else:
        arun(middleware.awrap_model_call(request, ahandler))
    return seen[0]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_middleware_prices_the_tools_each_call_is_sent(mode: str) -> None:
    counter = resolve_counter("approximate")
    history: list[BaseMessage] = [HumanMessage("hi " * 50), AIMessage("hello " * 50)] * 3
    history.append(HumanMessage("and now?"))
    schema = openai_tool()
    tools: list[Any] = [lookup, schema]
    pinned = counter.count([SystemMessage("Be brief.")])
    # Room for the tools and the last two turns only once the schema grows.
    budget = pinned + counter.count(history) + price(counter, tools) + 20
    middleware = TurnTrimMiddleware(max_tokens=budget)

    def request() -> Any:
        return ModelRequest(
            model=None,  # type: ignore[arg-type]
            messages=list(history),  # type: ignore[arg-type]
            system_message=SystemMessage("Be brief."),
            tools=tools,
        )

    assert len(_call(middleware, request(), mode).messages) == len(history)
    schema["function"]["description"] = "Book a flight." + LONG
    sent = _call(middleware, request(), mode)
    assert len(sent.messages) < len(history)
    _, report = middleware.trim_request(request())
    assert report.plan.overhead_tokens == fresh(counter, tools)
