"""Bench-only: counts the SQLite write and read transactions of a process (its ``BEGIN`` statements).

Put on ``PYTHONPATH`` with ``AWAKEN_BENCH_BEGINS=<file>``: every ``BEGIN`` any ``sqlite3`` connection of the process
runs appends one line (``w`` for ``BEGIN IMMEDIATE``, ``r`` for a plain read snapshot) to that file, so a benchmark
driving the process over its pipes can count the transactions of one prompt by the lines added meanwhile.
"""

import os
import sqlite3

_path = os.environ.get("AWAKEN_BENCH_BEGINS")

if _path:
    _out = open(_path, "a", buffering=1)  # noqa: SIM115 - lives as long as the process
    _connect = sqlite3.connect

    def _trace(sql: str) -> None:
        if sql.startswith("BEGIN"):
            _out.write("w\n" if "IMMEDIATE" in sql else "r\n")

    def connect(*args, **kwargs):  # type: ignore[no-untyped-def]
        conn = _connect(*args, **kwargs)
        conn.set_trace_callback(_trace)
        return conn

    sqlite3.connect = connect
