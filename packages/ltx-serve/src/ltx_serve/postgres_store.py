"""The job queue in a PostgreSQL table that several servers (machines) share (`--queue postgresql://...`).

Same rows and rules as `SqliteJobStore`; a claim is `SELECT ... FOR UPDATE SKIP LOCKED`, so workers of
different servers take different jobs without waiting on each other. Outputs go to the data folder, which
such servers share (a network folder). Needs `psycopg` (`pip install ltx-serve[postgres]`).
"""

from __future__ import annotations

import json
import time
from typing import Any

from ltx_serve.jobs import (
    ADD_PHASE_SECONDS,
    COLUMNS,
    PHASE_TOTALS_TABLE,
    Job,
    QueueFullError,
    gave_up_error,
    job_from_row,
    new_job_id,
)

VISIBLE = "status IN ('queued', 'in_progress', 'completed', 'failed')"


class PostgresJobStore:
    def __init__(self, url: str) -> None:
        try:
            import psycopg
        except ImportError:
            raise ValueError(f"--queue {url}: PostgreSQL needs psycopg (pip install 'ltx-serve[postgres]')") from None
        self._db = psycopg.connect(url, autocommit=True)
        with self._db.transaction():
            # Two servers starting at once both create the table: the advisory lock makes that one at a time.
            self._db.execute("SELECT pg_advisory_xact_lock(7321)")
            self._db.execute(
                """CREATE TABLE IF NOT EXISTS ltx_serve_jobs (
                    id TEXT PRIMARY KEY, seq BIGSERIAL, created_at DOUBLE PRECISION NOT NULL,
                    status TEXT NOT NULL, progress INTEGER NOT NULL DEFAULT 0, request TEXT NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0, max_attempts INTEGER NOT NULL, error TEXT,
                    claimed_by TEXT, started_at DOUBLE PRECISION, completed_at DOUBLE PRECISION, phase TEXT,
                    step INTEGER NOT NULL DEFAULT 0, steps INTEGER NOT NULL DEFAULT 0, output TEXT, timings TEXT,
                    heartbeat DOUBLE PRECISION, idempotency_key TEXT UNIQUE)"""
            )
            self._db.execute("CREATE INDEX IF NOT EXISTS ltx_serve_jobs_status_seq ON ltx_serve_jobs (status, seq)")
            self._db.execute(PHASE_TOTALS_TABLE.format(table="ltx_serve_phase_totals"))

    def _one(self, where: str, *args: Any) -> Job | None:
        row = self._db.execute(f"SELECT {COLUMNS} FROM ltx_serve_jobs WHERE {where}", args).fetchone()
        return None if row is None else job_from_row(row)

    def enqueue(
        self, request: dict[str, Any], *, idempotency_key: str | None, max_attempts: int, max_queued: int | None = None
    ) -> tuple[Job, bool]:
        with self._db.transaction():
            # One enqueue at a time, so the queue bound and the idempotency check hold across servers.
            self._db.execute("SELECT pg_advisory_xact_lock(7322)")
            if idempotency_key is not None:
                known = self._one("idempotency_key = %s", idempotency_key)
                if known is not None:
                    return known, False
            if max_queued is not None:
                (queued,) = self._db.execute("SELECT COUNT(*) FROM ltx_serve_jobs WHERE status = 'queued'").fetchone()
                if queued >= max_queued:
                    raise QueueFullError(max_queued)
            job_id = new_job_id()
            self._db.execute(
                "INSERT INTO ltx_serve_jobs (id, created_at, status, request, max_attempts, idempotency_key) "
                "VALUES (%s, %s, 'queued', %s, %s, %s)",
                (job_id, time.time(), json.dumps(request), max_attempts, idempotency_key),
            )
        job = self.get(job_id)
        assert job is not None
        return job, True

    def get(self, job_id: str) -> Job | None:
        return self._one(f"id = %s AND {VISIBLE}", job_id)

    def list(self, *, after: str | None = None, limit: int = 20, order: str = "desc") -> tuple[list[Job], bool]:
        direction, compare = ("DESC", "<") if order == "desc" else ("ASC", ">")
        where, args = VISIBLE, []
        if after is not None:
            where += f" AND seq {compare} (SELECT seq FROM ltx_serve_jobs WHERE id = %s)"
            args.append(after)
        rows = self._db.execute(
            f"SELECT {COLUMNS} FROM ltx_serve_jobs WHERE {where} ORDER BY seq {direction} LIMIT %s", (*args, limit + 1)
        ).fetchall()
        return [job_from_row(r) for r in rows[:limit]], len(rows) > limit

    def claim(self, worker: str) -> Job | None:
        now = time.time()
        row = self._db.execute(
            "UPDATE ltx_serve_jobs SET status = 'in_progress', claimed_by = %s, started_at = %s, heartbeat = %s, "
            "attempts = attempts + 1, progress = 0, phase = 'starting', step = 0, steps = 0 WHERE id = ("
            "SELECT id FROM ltx_serve_jobs WHERE status = 'queued' ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED"
            ") RETURNING id",
            (worker, now, now),
        ).fetchone()
        return None if row is None else self._one("id = %s", row[0])

    def heartbeat(self, job_id: str, worker: str) -> None:
        self._db.execute(
            "UPDATE ltx_serve_jobs SET heartbeat = %s WHERE id = %s AND claimed_by = %s AND status = 'in_progress'",
            (time.time(), job_id, worker),
        )

    def progress(self, job_id: str, worker: str, *, progress: int, phase: str, step: int, steps: int) -> None:
        self._db.execute(
            "UPDATE ltx_serve_jobs SET progress = %s, phase = %s, step = %s, steps = %s, heartbeat = %s "
            "WHERE id = %s AND claimed_by = %s AND status = 'in_progress'",
            (progress, phase, step, steps, time.time(), job_id, worker),
        )

    def complete(self, job_id: str, worker: str, *, output: str, timings: dict[str, float]) -> bool:
        with self._db.transaction():
            cursor = self._db.execute(
                "UPDATE ltx_serve_jobs SET status = 'completed', progress = 100, phase = 'done', completed_at = %s, "
                "output = %s, timings = %s WHERE id = %s AND claimed_by = %s AND status = 'in_progress'",
                (time.time(), output, json.dumps(timings), job_id, worker),
            )
            done = cursor.rowcount == 1
            if done:
                add = ADD_PHASE_SECONDS.format(table="ltx_serve_phase_totals", p="%s")
                self._db.cursor().executemany(add, list(timings.items()))
        return done

    def fail(self, job_id: str, worker: str, *, error: dict[str, Any], retry: bool) -> None:
        with self._db.transaction():
            row = self._db.execute(
                "SELECT attempts, max_attempts FROM ltx_serve_jobs WHERE id = %s AND claimed_by = %s "
                "AND status = 'in_progress' FOR UPDATE",
                (job_id, worker),
            ).fetchone()
            if row is None:
                return
            if retry and row[0] < row[1]:
                self._db.execute(
                    "UPDATE ltx_serve_jobs SET status = 'queued', claimed_by = NULL, phase = NULL WHERE id = %s",
                    (job_id,),
                )
            else:
                self._db.execute(
                    "UPDATE ltx_serve_jobs SET status = 'failed', error = %s, completed_at = %s WHERE id = %s",
                    (json.dumps(error), time.time(), job_id),
                )

    def cancel(self, job_id: str) -> Job | None:
        with self._db.transaction():
            job = self._one(f"id = %s AND {VISIBLE} FOR UPDATE", job_id)
            if job is not None:
                self._db.execute("UPDATE ltx_serve_jobs SET status = 'cancelled' WHERE id = %s", (job_id,))
        return job

    def is_cancelled(self, job_id: str) -> bool:
        row = self._db.execute("SELECT status FROM ltx_serve_jobs WHERE id = %s", (job_id,)).fetchone()
        return row is None or row[0] == "cancelled"

    def purge(self, job_id: str) -> None:
        self._db.execute("DELETE FROM ltx_serve_jobs WHERE id = %s AND status = 'cancelled'", (job_id,))

    def requeue_stale(self, *, older_than_s: float | None) -> list[str]:
        if older_than_s is None:
            return self._requeue("status = 'in_progress'", ())
        return self._requeue("status = 'in_progress' AND heartbeat < %s", (time.time() - older_than_s,))

    def requeue_worker(self, worker: str) -> list[str]:
        return self._requeue("status = 'in_progress' AND claimed_by = %s", (worker,))

    def cancelled_claim(self, worker: str) -> str | None:
        row = self._db.execute(
            "SELECT id FROM ltx_serve_jobs WHERE status = 'cancelled' AND claimed_by = %s", (worker,)
        ).fetchone()
        return None if row is None else row[0]

    def _requeue(self, where: str, args: tuple[Any, ...]) -> list[str]:
        requeued = []
        with self._db.transaction():
            rows = self._db.execute(
                f"SELECT id, attempts, max_attempts FROM ltx_serve_jobs WHERE {where} FOR UPDATE SKIP LOCKED", args
            ).fetchall()
            for job_id, attempts, max_attempts in rows:
                if attempts >= max_attempts:
                    self._db.execute(
                        "UPDATE ltx_serve_jobs SET status = 'failed', error = %s, completed_at = %s WHERE id = %s",
                        (json.dumps(gave_up_error(attempts)), time.time(), job_id),
                    )
                else:
                    self._db.execute(
                        "UPDATE ltx_serve_jobs SET status = 'queued', claimed_by = NULL WHERE id = %s", (job_id,)
                    )
                    requeued.append(job_id)
        return requeued

    def counts(self) -> dict[str, int]:
        rows = self._db.execute("SELECT status, COUNT(*) FROM ltx_serve_jobs GROUP BY status").fetchall()
        return {status: n for status, n in rows}

    def phase_totals(self) -> dict[str, tuple[float, int]]:
        rows = self._db.execute("SELECT phase, seconds, jobs FROM ltx_serve_phase_totals").fetchall()
        return {phase: (seconds, jobs) for phase, seconds, jobs in rows}

    def close(self) -> None:
        self._db.close()
