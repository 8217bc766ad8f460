"""The ``turntrim`` command.

* ``app``: argument parsing, the commands and their exit statuses;
* ``transcript``: reading transcripts and writing kept messages in their shape;
* ``diagnostics``: why a message dict was rejected, naming the field;
* ``tables``: the ``report`` and ``demo`` tables (``rich``, the ``cli`` extra);
* ``sample_conversation.json``: the conversation ``turntrim demo`` shows.
"""

from langchain_turntrim._cli.app import main

__all__ = ["main"]
