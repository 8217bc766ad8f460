"""OpenAI's chat token counting, offline: the rules ``TiktokenCounter`` follows.

* ``counter``: ``TiktokenCounter``, ChatOpenAI's count per message;
* ``chat``: the per-message and per-request constants, and ``PlainCounter``
  (the same counts of plain message dicts, without LangChain);
* ``images``, ``tools``: what images and tool schemas add to a request;
* ``models``: which encoding a model name uses;
* ``encodings``: loading an encoding from tiktoken's cache, else a bounded download.

Nothing is imported here: ``chat`` must load without LangChain (the
``turntrim`` command's plain path), and tiktoken only when a counter is built.
"""
