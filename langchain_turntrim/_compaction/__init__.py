"""``on_overflow="compact"``: a newest turn too large for the budget made to
fit, never a request without the task (``ladder``), by edits that make new
messages and never change a provider's reasoning or calls (``edits``)."""

from langchain_turntrim._compaction.edits import Rebuilds
from langchain_turntrim._compaction.ladder import Compacted, compact

__all__ = ["Compacted", "Rebuilds", "compact"]
