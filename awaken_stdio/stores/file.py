"""``file:///abs/dir``: plain JSON files, one directory per thread and per profile owner, for people who want to
read or version their conversations.

Every file is replaced atomically (temporary file, fsync, ``os.replace``, fsync of the directory). A checkpoint is
atomic because one file commits it: a thread's ``commit.json`` holds the thread record, its thread state, its runs
and the list of message chunks that belong to it. The checkpoint first writes its messages as a new chunk file,
then replaces ``commit.json``; a process killed in between leaves an unreferenced chunk that the next checkpoint at
that position overwrites. Every operation holds an ``flock`` on ``.lock`` (and an ``anyio.Lock`` in-process), so
processes sharing the directory take turns; blocking file I/O runs in a worker thread.

Layout::

    awaken-store.json                       {"application": "awaken-stdio", "format": 1}
    threads/<thread>/commit.json            {"thread", "state", "chunks": [[first_seq, count]...], "runs": {...}}
    threads/<thread>/m<first_seq>.jsonl     one message per line
    run-index/<run>                         the run's thread id
    sessions/<session>.json   grants/<grant>.json   profiles/<owner>/<key>.json

Names are percent-encoded (everything but ``A-Z a-z 0-9 _ -``), so any id is a safe file name.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable, Iterator
from functools import cached_property, partial
from pathlib import Path
from typing import Any, TypeVar

import anyio

from awaken_stdio.contract.errors import SchemaTooNew, StoreUnavailable
from awaken_stdio.contract.ids import now_ms
from awaken_stdio.contract.lifecycle import RunStatus
from awaken_stdio.contract.mailbox import MailboxStore
from awaken_stdio.contract.messages import Message, message_from_json, message_to_json
from awaken_stdio.contract.profile import ProfileEntry
from awaken_stdio.contract.state import PersistedState
from awaken_stdio.contract.stores import (
    Checkpoint,
    LoadedThread,
    Page,
    PermissionGrant,
    RunRecord,
    SessionRecord,
    Store,
    ThreadRecord,
)
from awaken_stdio.stores._base import BaseStore, drive
from awaken_stdio.stores._codec import (
    answered_calls,
    check_count,
    check_run_thread,
    dumps,
    grant_from_json,
    loads,
    page_newest_first,
    record_to_json,
    session_from_json,
    thread_from_json,
)
from awaken_stdio.stores.mailbox_core import MailboxBase, Op, check_fence
from awaken_stdio.stores.mailbox_memory import MailboxTables
from awaken_stdio.stores.migrations import APPLICATION

__all__ = ["FORMAT", "FileMailbox", "FileStore"]

T = TypeVar("T")
MAILBOX_FILE = "mailbox.json"
FORMAT = 1
MARKER = "awaken-store.json"
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _name(ident: str) -> str:
    """A file name for any id: never empty, never ``.``/``..``, no separators."""
    return "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in ident.encode()) or "%"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _read(path: Path) -> Any | None:
    try:
        return loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def _json_files(directory: Path) -> Iterator[Any]:
    if directory.is_dir():
        for entry in directory.iterdir():
            if entry.suffix == ".json" and (data := _read(entry)) is not None:
                yield data


def _prepare_dir(root: Path) -> None:
    """Create or recognise the store directory and prove it is writable."""
    marker = root / MARKER
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        found = _read(marker)
        if found is None:
            if any(p.name != ".lock" for p in root.iterdir()):
                raise StoreUnavailable(f"{root} is not an awaken-stdio store directory (it has files but no {MARKER})")
            _write_atomic(marker, dumps({"application": APPLICATION, "format": FORMAT}))
        elif not isinstance(found, dict) or found.get("application") != APPLICATION:
            raise StoreUnavailable(f"{root} is not an awaken-stdio store directory ({MARKER} names another program)")
        elif int(found.get("format", 0)) > FORMAT:
            raise SchemaTooNew(str(root), int(found["format"]), FORMAT)
        else:
            probe = root / ".probe"
            probe.write_bytes(b"")
            probe.unlink()
    except OSError as exc:
        raise StoreUnavailable(f"cannot write to the store directory {root}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise StoreUnavailable(f"{root} is not an awaken-stdio store directory (unreadable {MARKER})") from exc


class FileStore(BaseStore, Store):
    durable = True

    def __init__(self, url: str, root: Path, lock_fd: int) -> None:
        self.url, self.root = url, root
        self._lock_fd = lock_fd
        self._lock = anyio.Lock()

    @classmethod
    async def open(cls, url: str, path: str) -> FileStore:
        root = Path(path)
        await anyio.to_thread.run_sync(_prepare_dir, root)
        try:
            fd = os.open(root / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StoreUnavailable(f"cannot write to the store directory {root}: {exc.strerror}") from exc
        return cls(url, root, fd)

    @cached_property
    def mailbox(self) -> MailboxStore:  # pyright: ignore[reportIncompatibleMethodOverride]  # read-only, as declared
        """The mailbox lives in ``mailbox.json`` beside the threads, under the same lock (:class:`FileMailbox`)."""
        return self._mailbox

    @cached_property
    def _mailbox(self) -> FileMailbox:
        return FileMailbox(self)

    async def _close(self) -> None:
        async with self._lock:
            os.close(self._lock_fd)

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run one whole operation in a worker thread, holding both locks."""
        self._check_open()
        async with self._lock:
            return await anyio.to_thread.run_sync(partial(self._locked, fn, *args))

    def _locked(self, fn: Callable[..., T], *args: Any) -> T:
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        try:
            return fn(*args)
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    # -- paths and commit documents --------------------------------------------------------------------------

    def _thread_dir(self, thread_id: str) -> Path:
        return self.root / "threads" / _name(thread_id)

    def _commit(self, thread_id: str) -> dict[str, Any] | None:
        return _read(self._thread_dir(thread_id) / "commit.json")

    def _commit_or_new(
        self, thread_id: str, agent_id: str | None = None, parent_thread_id: str | None = None
    ) -> dict[str, Any]:
        c = self._commit(thread_id)
        if c is None:
            c = {
                "thread": record_to_json(
                    ThreadRecord(thread_id=thread_id, agent_id=agent_id, parent_thread_id=parent_thread_id)
                ),
                "state": None,
                "chunks": [],
                "runs": {},
            }
        return c

    def _save_commit(self, thread_id: str, c: dict[str, Any]) -> None:
        _write_atomic(self._thread_dir(thread_id) / "commit.json", dumps(c))

    def _index_run(self, run: RunRecord) -> None:
        path = self.root / "run-index" / _name(run.run_id)
        if not path.exists():
            _write_atomic(path, run.thread_id)

    def _commits(self) -> Iterator[dict[str, Any]]:
        threads = self.root / "threads"
        if threads.is_dir():
            for d in threads.iterdir():
                if (c := _read(d / "commit.json")) is not None:
                    yield c

    def _messages(self, thread_id: str, c: dict[str, Any], offset: int, limit: int | None) -> list[Message]:
        end = c["thread"]["message_count"] if limit is None else offset + limit
        out: list[Message] = []
        for first, count in c["chunks"]:
            if first + count <= offset or first >= end:
                continue
            lines = (self._thread_dir(thread_id) / f"m{first:012d}.jsonl").read_text(encoding="utf-8").splitlines()
            lo, hi = max(offset - first, 0), min(end - first, count)
            out.extend(message_from_json(loads(line)) for line in lines[lo:hi])
        return out

    # -- threads ---------------------------------------------------------------------------------------------

    def _load_thread(self, thread_id: str) -> LoadedThread | None:
        c = self._commit(thread_id)
        if c is None:
            return None
        runs = [RunRecord.from_json(r) for r in c["runs"].values()]
        return LoadedThread(
            thread=thread_from_json(c["thread"]),
            messages=self._messages(thread_id, c, 0, None),
            state=PersistedState.from_json(c["state"]) if c["state"] is not None else None,
            latest_run=max(runs, key=lambda r: (r.updated_at, r.run_id)) if runs else None,
        )

    async def load_thread(self, thread_id: str) -> LoadedThread | None:
        return await self._run(self._load_thread, thread_id)

    def _load_messages(self, thread_id: str, offset: int, limit: int | None) -> list[Message]:
        c = self._commit(thread_id)
        return self._messages(thread_id, c, offset, limit) if c is not None else []

    async def load_messages(self, thread_id: str, *, offset: int = 0, limit: int | None = None) -> list[Message]:
        return await self._run(self._load_messages, thread_id, offset, limit)

    def _checkpoint(self, cp: Checkpoint, lines: str, run: dict[str, Any], state: dict[str, Any] | None) -> None:
        if cp.fence is not None:  # under the store's lock: no claim can move between this check and the commit
            refused = self._mailbox._apply(lambda tables: drive(check_fence(tables, cp.fence, now_ms())))
            if refused is not None:
                raise refused.error
        for mark in cp.marks:  # in another file, first: a crash before the commit leaves a mark with no step,
            self._mailbox._apply(lambda tables, m=mark: drive(tables.effect_put(m)))  # which recovery handles
        c = self._commit_or_new(cp.thread_id, cp.run.agent_id, cp.run.parent_thread_id)
        first = c["thread"]["message_count"]
        check_count(cp, first)
        if cp.messages:
            _write_atomic(self._thread_dir(cp.thread_id) / f"m{first:012d}.jsonl", lines)
            c["chunks"].append([first, len(cp.messages)])
        self._index_run(cp.run)
        c["thread"]["message_count"] = first + len(cp.messages)
        c["thread"]["updated_at"] = now_ms()
        if state is not None:
            c["state"] = state
        c["runs"][cp.run.run_id] = run
        self._save_commit(cp.thread_id, c)  # the commit point
        if answered := answered_calls(cp):  # in another file: a crash before this leaves answered calls started
            self._mailbox._apply(lambda tables: tables.settle(cp.thread_id, answered, now_ms()))

    async def checkpoint(self, cp: Checkpoint) -> None:
        check_run_thread(cp)
        lines = "".join(dumps(message_to_json(m)) + "\n" for m in cp.messages)
        state = cp.thread_state.to_json() if cp.thread_state is not None else None
        await self._run(self._checkpoint, cp, lines, cp.run.to_json(), state)

    def _save_thread(self, thread: dict[str, Any]) -> None:
        c = self._commit_or_new(thread["thread_id"])
        thread["message_count"] = c["thread"]["message_count"]  # owned by checkpoints
        c["thread"] = thread
        self._save_commit(thread["thread_id"], c)

    async def save_thread(self, thread: ThreadRecord) -> None:
        await self._run(self._save_thread, record_to_json(thread))

    def _load_thread_state(self, thread_id: str) -> PersistedState | None:
        c = self._commit(thread_id)
        return PersistedState.from_json(c["state"]) if c is not None and c["state"] is not None else None

    async def load_thread_state(self, thread_id: str) -> PersistedState | None:
        return await self._run(self._load_thread_state, thread_id)

    def _save_thread_state(self, thread_id: str, state: dict[str, Any]) -> None:
        c = self._commit_or_new(thread_id)
        c["state"] = state
        self._save_commit(thread_id, c)

    async def save_thread_state(self, thread_id: str, state: PersistedState) -> None:
        await self._run(self._save_thread_state, thread_id, state.to_json())

    def _list_threads(self) -> list[ThreadRecord]:
        return [thread_from_json(c["thread"]) for c in self._commits()]

    async def list_threads(self, *, limit: int = 100, cursor: str | None = None) -> Page[ThreadRecord]:
        threads = await self._run(self._list_threads)
        return page_newest_first(
            threads, lambda t: (t.updated_at, t.thread_id), kind="threads", limit=limit, cursor=cursor
        )

    def _delete_thread(self, thread_id: str) -> None:
        d = self._thread_dir(thread_id)
        c = self._commit(thread_id)
        if c is None:
            shutil.rmtree(d, ignore_errors=True)  # at most orphan chunks of a never-committed thread
            return
        (d / "commit.json").unlink()  # the thread is gone from here on; the rest is cleanup
        _fsync_dir(d)
        for run_id in c["runs"]:
            (self.root / "run-index" / _name(run_id)).unlink(missing_ok=True)
        shutil.rmtree(d, ignore_errors=True)

    async def delete_thread(self, thread_id: str) -> None:
        await self._run(self._delete_thread, thread_id)

    # -- runs ------------------------------------------------------------------------------------------------

    def _load_run(self, run_id: str) -> RunRecord | None:
        path = self.root / "run-index" / _name(run_id)
        try:
            thread_id = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        c = self._commit(thread_id)
        found = c["runs"].get(run_id) if c is not None else None
        return RunRecord.from_json(found) if found is not None else None

    async def load_run(self, run_id: str) -> RunRecord | None:
        return await self._run(self._load_run, run_id)

    def _save_run(self, run: RunRecord, data: dict[str, Any]) -> None:
        self._index_run(run)
        c = self._commit_or_new(run.thread_id, run.agent_id, run.parent_thread_id)
        c["runs"][run.run_id] = data
        self._save_commit(run.thread_id, c)

    async def save_run(self, run: RunRecord) -> None:
        await self._run(self._save_run, run, run.to_json())

    def _thread_runs(self, thread_id: str | None) -> list[RunRecord]:
        commits = self._commits() if thread_id is None else filter(None, [self._commit(thread_id)])
        return [RunRecord.from_json(r) for c in commits for r in c["runs"].values()]

    async def latest_run(self, thread_id: str) -> RunRecord | None:
        runs = await self._run(self._thread_runs, thread_id)
        return max(runs, key=lambda r: (r.updated_at, r.run_id)) if runs else None

    async def list_runs(
        self,
        *,
        thread_id: str | None = None,
        statuses: list[RunStatus] | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page[RunRecord]:
        runs = await self._run(self._thread_runs, thread_id)
        if statuses is not None:
            runs = [r for r in runs if r.status in statuses]
        return page_newest_first(runs, lambda r: (r.updated_at, r.run_id), kind="runs", limit=limit, cursor=cursor)

    # -- profiles --------------------------------------------------------------------------------------------

    def _owner_dir(self, owner: str) -> Path:
        return self.root / "profiles" / _name(owner)

    def _profile_path(self, owner: str, key: str) -> Path:
        return self._owner_dir(owner) / f"{_name(key)}.json"

    def _get_profile(self, owner: str, key: str) -> ProfileEntry | None:
        d = _read(self._profile_path(owner, key))
        return ProfileEntry(key=d["key"], value=d["value"], updated_at=d["updated_at"]) if d is not None else None

    async def get_profile(self, owner: str, key: str) -> ProfileEntry | None:
        return await self._run(self._get_profile, owner, key)

    async def set_profile(self, owner: str, key: str, value: Any) -> None:
        text = dumps({"key": key, "value": value, "updated_at": now_ms()})
        await self._run(_write_atomic, self._profile_path(owner, key), text)

    async def delete_profile(self, owner: str, key: str) -> None:
        await self._run(self._profile_path(owner, key).unlink, True)

    def _list_profile(self, owner: str) -> list[ProfileEntry]:
        entries = [
            ProfileEntry(key=d["key"], value=d["value"], updated_at=d["updated_at"])
            for d in _json_files(self._owner_dir(owner))
        ]
        return sorted(entries, key=lambda e: e.key)

    async def list_profile(self, owner: str) -> list[ProfileEntry]:
        return await self._run(self._list_profile, owner)

    async def clear_profile_owner(self, owner: str) -> None:
        await self._run(shutil.rmtree, self._owner_dir(owner), True)

    # -- sessions --------------------------------------------------------------------------------------------

    def _session_path(self, session_id: str) -> Path:
        return self.root / "sessions" / f"{_name(session_id)}.json"

    async def save_session(self, session: SessionRecord) -> None:
        await self._run(_write_atomic, self._session_path(session.session_id), dumps(record_to_json(session)))

    async def load_session(self, session_id: str) -> SessionRecord | None:
        d = await self._run(_read, self._session_path(session_id))
        return session_from_json(d) if d is not None else None

    async def list_sessions(
        self, *, cwd: str | None = None, limit: int = 100, cursor: str | None = None
    ) -> Page[SessionRecord]:
        found = await self._run(lambda: list(_json_files(self.root / "sessions")))
        sessions = [s for s in map(session_from_json, found) if cwd is None or s.cwd == cwd]
        return page_newest_first(
            sessions, lambda s: (s.updated_at, s.session_id), kind="sessions", limit=limit, cursor=cursor
        )

    async def delete_session(self, session_id: str) -> None:
        await self._run(self._session_path(session_id).unlink, True)

    # -- permission grants -----------------------------------------------------------------------------------

    def _grant_path(self, grant_id: str) -> Path:
        return self.root / "grants" / f"{_name(grant_id)}.json"

    async def add_grant(self, grant: PermissionGrant) -> None:
        await self._run(_write_atomic, self._grant_path(grant.grant_id), dumps(record_to_json(grant)))

    async def list_grants(self, workspace: str, *, now: int | None = None) -> list[PermissionGrant]:
        at = now_ms() if now is None else now
        found = await self._run(lambda: list(_json_files(self.root / "grants")))
        grants = [g for g in map(grant_from_json, found) if g.workspace == workspace and g.active(at)]
        return sorted(grants, key=lambda g: (g.created_at, g.grant_id))

    async def delete_grant(self, grant_id: str) -> None:
        await self._run(self._grant_path(grant_id).unlink, True)


class FileMailbox(MailboxBase):
    """The mailbox tables (``mailbox_memory.MailboxTables``) in ``mailbox.json``, rewritten under the store's lock."""

    def __init__(self, store: FileStore) -> None:
        self._store = store

    def _apply(self, fn: Callable[[MailboxTables], T]) -> T:
        """``fn`` on the tables, rewritten if it changed them; only under the store's lock."""
        path = self._store.root / MAILBOX_FILE
        tables = MailboxTables.from_json(_read(path) or {})
        result = fn(tables)
        if tables.dirty:
            _write_atomic(path, dumps(tables.to_json()))
        return result

    async def _write(self, fn: Op[T]) -> T:
        return await self._store._run(lambda: self._apply(lambda tables: drive(fn(tables))))

    async def _read(self, fn: Op[T]) -> T:
        return await self._write(fn)
