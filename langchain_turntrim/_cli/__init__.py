"""The ``turntrim`` command.

* ``app``: argument parsing, the commands and their exit statuses;
* ``planning``: the counter and overflow options, and the plan of a transcript
  (of a plain one counted with tiktoken, without importing LangChain);
* ``transcript``: reading transcripts and writing kept messages in their shape;
* ``conversion``: message dicts to LangChain messages, naming the first wrong one;
* ``diagnostics``: why a message dict was rejected, naming the field;
* ``terminal``: what is displayed, with control characters neutralised;
* ``tables``: the ``report`` and ``demo`` tables (``rich``, the ``cli`` extra);
* ``sample_conversation.json``: the conversation ``turntrim demo`` shows.
"""

from langchain_turntrim._cli.app import main

__all__ = ["main"]
