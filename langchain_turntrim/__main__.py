"""``python -m langchain_turntrim``: the ``turntrim`` command."""

from langchain_turntrim._cli import main

if __name__ == "__main__":
    raise SystemExit(main())
