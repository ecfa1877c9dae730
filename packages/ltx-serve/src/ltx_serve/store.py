"""The durable job queue: every accepted request is a row before the API answers, so a restart (or `kill -9`)
loses nothing. `JobStore` (in `jobs`) is the interface; `SqliteJobStore` (WAL, the default) keeps it in one
file of the data folder, `PostgresJobStore` (in `postgres_store`) in a table several servers share.

A job's life: `queued` -> `in_progress` (claimed by one worker, `attempts` + 1) -> `completed` | `failed`.
`cancelled` rows are deleted jobs whose worker has not noticed yet; the API never shows them. A claim whose
worker died goes back to `queued` (`requeue_stale`) until it has used `max_attempts`, then fails with a reason.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ltx_serve.jobs import (
    ADD_PHASE_SECONDS,
    COLUMNS,
    PHASE_TOTALS_TABLE,
    Job,
    JobStore,
    QueueFullError,
    gave_up_error,
    job_from_row,
    new_job_id,
)
from ltx_serve.postgres_store import PostgresJobStore


class SqliteJobStore:
    """The queue in one SQLite file in WAL mode (readers never block the writer; several processes on one host
    share it). Claims take the write lock (`BEGIN IMMEDIATE`), so two workers never claim the same row."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: we issue BEGIN ourselves, so each method is exactly one transaction.
        self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=30000")
        with self._write():
            self._db.execute(
                """CREATE TABLE IF NOT EXISTS jobs (
                    id TEXT PRIMARY KEY, seq INTEGER NOT NULL, created_at REAL NOT NULL, status TEXT NOT NULL,
                    progress INTEGER NOT NULL DEFAULT 0, request TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
                    max_attempts INTEGER NOT NULL, error TEXT, claimed_by TEXT, started_at REAL,
                    completed_at REAL, phase TEXT, step INTEGER NOT NULL DEFAULT 0,
                    steps INTEGER NOT NULL DEFAULT 0, output TEXT, timings TEXT, heartbeat REAL,
                    idempotency_key TEXT UNIQUE)"""
            )
            self._db.execute("CREATE INDEX IF NOT EXISTS jobs_status_seq ON jobs (status, seq)")
            self._db.execute(PHASE_TOTALS_TABLE.format(table="phase_totals"))

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _one(self, where: str, *args: Any) -> Job | None:
        row = self._db.execute(f"SELECT {COLUMNS} FROM jobs WHERE {where}", args).fetchone()
        return None if row is None else job_from_row(row)

    def enqueue(
        self,
        request: dict[str, Any],
        *,
        idempotency_key: str | None,
        max_attempts: int,
        max_queued: int | None = None,
    ) -> tuple[Job, bool]:
        """The new queued job and True; or, for an `idempotency_key` seen before, that job and False."""
        with self._write() as db:
            if idempotency_key is not None:
                known = self._one("idempotency_key = ?", idempotency_key)
                if known is not None:
                    return known, False
            if max_queued is not None:
                (active,) = db.execute("SELECT COUNT(*) FROM jobs WHERE status = 'queued'").fetchone()
                if active >= max_queued:
                    raise QueueFullError(max_queued)
            (seq,) = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM jobs").fetchone()
            job_id = new_job_id()
            db.execute(
                "INSERT INTO jobs (id, seq, created_at, status, request, max_attempts, idempotency_key) "
                "VALUES (?, ?, ?, 'queued', ?, ?, ?)",
                (job_id, seq, time.time(), json.dumps(request), max_attempts, idempotency_key),
            )
        job = self.get(job_id)
        assert job is not None
        return job, True

    def get(self, job_id: str) -> Job | None:
        return self._one("id = ? AND status IN ('queued', 'in_progress', 'completed', 'failed')", job_id)

    def list(self, *, after: str | None = None, limit: int = 20, order: str = "desc") -> tuple[list[Job], bool]:
        """A page of visible jobs by creation order after the job `after`, and whether more follow."""
        direction, compare = ("DESC", "<") if order == "desc" else ("ASC", ">")
        where, args = "status IN ('queued', 'in_progress', 'completed', 'failed')", []
        if after is not None:
            where += f" AND seq {compare} (SELECT seq FROM jobs WHERE id = ?)"
            args.append(after)
        rows = self._db.execute(
            f"SELECT {COLUMNS} FROM jobs WHERE {where} ORDER BY seq {direction} LIMIT ?", (*args, limit + 1)
        ).fetchall()
        return [job_from_row(r) for r in rows[:limit]], len(rows) > limit

    def claim(self, worker: str) -> Job | None:
        """The oldest queued job, now `in_progress` for `worker` (None when the queue is empty)."""
        with self._write() as db:
            row = db.execute("SELECT id FROM jobs WHERE status = 'queued' ORDER BY seq LIMIT 1").fetchone()
            if row is None:
                return None
            now = time.time()
            db.execute(
                "UPDATE jobs SET status = 'in_progress', claimed_by = ?, started_at = ?, heartbeat = ?, "
                "attempts = attempts + 1, progress = 0, phase = 'starting', step = 0, steps = 0 WHERE id = ?",
                (worker, now, now, row[0]),
            )
        return self._one("id = ?", row[0])

    def heartbeat(self, job_id: str, worker: str) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE jobs SET heartbeat = ? WHERE id = ? AND claimed_by = ? AND status = 'in_progress'",
                (time.time(), job_id, worker),
            )

    def progress(self, job_id: str, worker: str, *, progress: int, phase: str, step: int, steps: int) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE jobs SET progress = ?, phase = ?, step = ?, steps = ?, heartbeat = ? "
                "WHERE id = ? AND claimed_by = ? AND status = 'in_progress'",
                (progress, phase, step, steps, time.time(), job_id, worker),
            )

    def complete(self, job_id: str, worker: str, *, output: str, timings: dict[str, float]) -> bool:
        """Mark the job done; False when it is no longer this worker's (cancelled, or requeued meanwhile)."""
        with self._write() as db:
            changed = db.execute(
                "UPDATE jobs SET status = 'completed', progress = 100, phase = 'done', completed_at = ?, "
                "output = ?, timings = ? WHERE id = ? AND claimed_by = ? AND status = 'in_progress'",
                (time.time(), output, json.dumps(timings), job_id, worker),
            ).rowcount
            if changed == 1:
                db.executemany(ADD_PHASE_SECONDS.format(table="phase_totals", p="?"), timings.items())
        return changed == 1

    def fail(self, job_id: str, worker: str, *, error: dict[str, Any], retry: bool) -> None:
        """Fail the job with `error`; with `retry`, queue it again while attempts remain."""
        with self._write() as db:
            job = self._one("id = ? AND claimed_by = ? AND status = 'in_progress'", job_id, worker)
            if job is None:
                return
            if retry and job.attempts < job.max_attempts:
                db.execute("UPDATE jobs SET status = 'queued', claimed_by = NULL, phase = NULL WHERE id = ?", (job_id,))
            else:
                db.execute(
                    "UPDATE jobs SET status = 'failed', error = ?, completed_at = ? WHERE id = ?",
                    (json.dumps(error), time.time(), job_id),
                )

    def cancel(self, job_id: str) -> Job | None:
        """Hide the job from the API (DELETE); a worker holding it notices and stops. The job as it was, or
        None if there is no such visible job."""
        with self._write() as db:
            job = self.get(job_id)
            if job is not None:
                db.execute("UPDATE jobs SET status = 'cancelled' WHERE id = ?", (job_id,))
        return job

    def is_cancelled(self, job_id: str) -> bool:
        row = self._db.execute("SELECT status FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return row is None or row[0] == "cancelled"

    def purge(self, job_id: str) -> None:
        with self._write() as db:
            db.execute("DELETE FROM jobs WHERE id = ? AND status = 'cancelled'", (job_id,))

    def requeue_stale(self, *, older_than_s: float | None) -> list[str]:
        """Queue again the running jobs whose worker is gone: all of them (`older_than_s` None, at start-up of
        the only server on this file), or those without a heartbeat for `older_than_s`. A job that has used its
        attempts fails with the reason instead. Returns the ids requeued."""
        where = "status = 'in_progress'"
        args: tuple[Any, ...] = ()
        if older_than_s is not None:
            where += " AND heartbeat < ?"
            args = (time.time() - older_than_s,)
        return self._requeue(where, args)

    def requeue_worker(self, worker: str) -> list[str]:
        """Queue again the job of a worker that died (same attempt rule as `requeue_stale`)."""
        return self._requeue("status = 'in_progress' AND claimed_by = ?", (worker,))

    def cancelled_claim(self, worker: str) -> str | None:
        """The deleted job `worker` still runs, if any (its supervisor stops the worker)."""
        row = self._db.execute(
            "SELECT id FROM jobs WHERE status = 'cancelled' AND claimed_by = ?", (worker,)
        ).fetchone()
        return None if row is None else row[0]

    def _requeue(self, where: str, args: tuple[Any, ...]) -> list[str]:
        with self._write() as db:
            rows = db.execute(f"SELECT id, attempts, max_attempts FROM jobs WHERE {where}", args).fetchall()
            requeued = []
            for job_id, attempts, max_attempts in rows:
                if attempts >= max_attempts:
                    db.execute(
                        "UPDATE jobs SET status = 'failed', error = ?, completed_at = ? WHERE id = ?",
                        (json.dumps(gave_up_error(attempts)), time.time(), job_id),
                    )
                else:
                    db.execute("UPDATE jobs SET status = 'queued', claimed_by = NULL WHERE id = ?", (job_id,))
                    requeued.append(job_id)
        return requeued

    def counts(self) -> dict[str, int]:
        # Counted on the (status, seq) index, not by reading the rows.
        rows = self._db.execute("SELECT status, COUNT(*) FROM jobs GROUP BY status").fetchall()
        return {status: n for status, n in rows}

    def phase_totals(self) -> dict[str, tuple[float, int]]:
        rows = self._db.execute("SELECT phase, seconds, jobs FROM phase_totals").fetchall()
        return {phase: (seconds, jobs) for phase, seconds, jobs in rows}

    def close(self) -> None:
        self._db.close()


def open_store(queue: str | None, data_dir: Path) -> JobStore:
    """The store `--queue` names: None -> SQLite in the data folder; `postgresql://...` -> the shared table."""
    if queue is None:
        return SqliteJobStore(data_dir / "jobs.sqlite3")
    if queue.startswith(("postgresql://", "postgres://")):
        return PostgresJobStore(queue)
    if queue.startswith("sqlite:///"):
        return SqliteJobStore(Path(queue.removeprefix("sqlite:///")))
    raise ValueError(f"--queue {queue!r}: expected postgresql://... or sqlite:///PATH")
