"""Replaying a recorded chat and reporting on it (``docs/replay.md``, ``docs/store.md``).

- :mod:`promptweave.replay.chat_log`: reading a chat log, and loading it into the stores;
- :mod:`promptweave.replay.replayer`: a chat log carried through the live loop, message by message;
- :mod:`promptweave.replay.report`, :mod:`promptweave.replay.report_charts`,
  :mod:`promptweave.replay.report_page`: the self-contained HTML page of a replay.
"""
