"""OpenAI's chat token counting, exact and offline: ``TiktokenCounter`` counts
as ``ChatOpenAI`` does, and prices images and tool schemas as OpenAI documents."""

from langchain_turntrim._counting.openai.counter import TiktokenCounter
from langchain_turntrim._counting.openai.encodings import EncodingUnavailableError

__all__ = ["EncodingUnavailableError", "TiktokenCounter"]
