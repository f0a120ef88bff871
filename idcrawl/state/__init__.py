"""Durable crawl state: a small store interface and its backends.

SQLite (stdlib, WAL) is the embedded default; a Redis backend for
distributed runs implements the same interface.
"""

from idcrawl.state.base import StateError, StateStore, TargetState
from idcrawl.state.sqlite import SqliteStateStore

__all__ = ["SqliteStateStore", "StateError", "StateStore", "TargetState"]
