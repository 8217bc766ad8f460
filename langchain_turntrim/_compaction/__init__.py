"""``on_overflow="compact"``: the newest turn made to fit, never a request without the task.

* ``ladder``: the rungs (clear old tool results, drop old steps, truncate
  the largest messages) and ``Compaction``, what they did;
* ``edits``: a message cleared to a note or truncated around one, as a new object;
* ``fit``: the ladder fitted to the budget in the counter's own units
  (directly for additive counters, by a bounded search for whole-list ones);
* ``copies``: the copies made lately, made again as the same objects (which
  the count cache knows) while their messages are unchanged;
* ``memo``: the compactions of a remembered history, given again while
  nothing they were made from changed.
"""
