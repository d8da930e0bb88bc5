"""SQL access to ``driver_shell_tasks`` (SQLite and PostgreSQL).

Every change of a task's state is conditional on the state it leaves (``running``), so two watchers of one
host (replicas sharing a machine, or a ``kill_task`` racing the watcher) decide a task's end once: the
one whose update wrote the row owns what follows (the metric, the announcement).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

from sqlalchemy import delete, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from larkbot.runtime.db import transaction

from ..tables import shell_tasks
from .core.shell import Task, TaskStatus

_T = shell_tasks


class TaskStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    def _tx(self) -> AbstractAsyncContextManager[AsyncConnection]:
        return transaction(self.engine)

    async def add(self, task: Task) -> Task:
        """Insert ``task``; when its call key exists already (a step redone), the task stored under it."""
        row = {name: getattr(task, name) for name in _T.c.keys()}  # noqa: SIM118 (column names)
        try:
            async with self._tx() as conn:
                await conn.execute(insert(_T).values(**row))
        except IntegrityError:
            existing = await self.by_call(task.call_key)
            if existing is None:
                raise
            return existing
        return task

    async def get(self, task_id: str) -> Task | None:
        async with self._tx() as conn:
            row = (await conn.execute(select(_T).where(_T.c.task_id == task_id))).mappings().first()
        return _task(row) if row is not None else None

    async def by_call(self, call_key: str) -> Task | None:
        async with self._tx() as conn:
            row = (await conn.execute(select(_T).where(_T.c.call_key == call_key))).mappings().first()
        return _task(row) if row is not None else None

    async def started(self, task_id: str, pgid: int) -> None:
        async with self._tx() as conn:
            await conn.execute(update(_T).where(_T.c.task_id == task_id).values(pgid=pgid))

    async def to_background(self, task_id: str) -> bool:
        """The call stopped waiting: the running task is announced when it ends."""
        stmt = update(_T).where(_T.c.task_id == task_id, _T.c.status == "running").values(background=True)
        async with self._tx() as conn:
            return (await conn.execute(stmt)).rowcount == 1

    async def finish(
        self,
        task_id: str,
        status: TaskStatus,
        *,
        exit_code: int | None,
        output_bytes: int | None,
        finished_at_ms: int,
        announced: bool,
    ) -> bool:
        """Move a running task to its end; ``False`` when it was not running any more."""
        stmt = (
            update(_T)
            .where(_T.c.task_id == task_id, _T.c.status == "running")
            .values(
                status=status,
                exit_code=exit_code,
                output_bytes=output_bytes,
                finished_at_ms=finished_at_ms,
                announced=announced,
            )
        )
        async with self._tx() as conn:
            return (await conn.execute(stmt)).rowcount == 1

    async def announced(self, task_id: str) -> None:
        async with self._tx() as conn:
            await conn.execute(update(_T).where(_T.c.task_id == task_id).values(announced=True))

    async def open(self, host: str) -> tuple[Task, ...]:
        """This host's tasks still running, or finished in the background and not yet announced."""
        stmt = (
            select(_T)
            .where(_T.c.host == host, or_(_T.c.status == "running", _T.c.announced.is_(False)))
            .order_by(_T.c.started_at_ms, _T.c.task_id)
        )
        async with self._tx() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return tuple(_task(row) for row in rows)

    async def running_of_chat(self, platform: str, chat_id: str) -> tuple[Task, ...]:
        """The chat's tasks still running, on any host, oldest first."""
        stmt = (
            select(_T)
            .where(_T.c.platform == platform, _T.c.chat_id == chat_id, _T.c.status == "running")
            .order_by(_T.c.started_at_ms, _T.c.task_id)
        )
        async with self._tx() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return tuple(_task(row) for row in rows)

    async def running_count(self, host: str) -> int:
        stmt = select(func.count()).select_from(_T).where(_T.c.host == host, _T.c.status == "running")
        async with self._tx() as conn:
            return int((await conn.execute(stmt)).scalar_one())

    async def expired(self, host: str, before_ms: int) -> tuple[str, ...]:
        """This host's finished and announced tasks that ended before ``before_ms``; removed here."""
        where = (
            _T.c.host == host,
            _T.c.status != "running",
            _T.c.announced.is_(True),
            _T.c.finished_at_ms < before_ms,
        )
        async with self._tx() as conn:
            ids = tuple((await conn.execute(select(_T.c.task_id).where(*where))).scalars().all())
            if ids:
                await conn.execute(delete(_T).where(_T.c.task_id.in_(ids)))
        return ids


def _task(row: Any) -> Task:
    return Task(
        task_id=row["task_id"],
        platform=row["platform"],
        chat_id=row["chat_id"],
        call_key=row["call_key"],
        host=row["host"],
        pgid=row["pgid"],
        command=row["command"],
        intention=row["intention"],
        status=row["status"],
        background=bool(row["background"]),
        announced=bool(row["announced"]),
        exit_code=row["exit_code"],
        output_bytes=row["output_bytes"],
        started_at_ms=row["started_at_ms"],
        finished_at_ms=row["finished_at_ms"],
    )
