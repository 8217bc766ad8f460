"""The ``turntrim`` command: ``app`` (arguments, commands, exit statuses),
``transcript`` (reading and writing back the shapes a transcript comes in) and
``tables`` (``report`` and ``demo``, with ``rich``)."""

from langchain_turntrim._cli.app import main

__all__ = ["main"]
