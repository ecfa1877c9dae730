"""The HTTP API in the shape of OpenAI's Videos API (`/v1/videos`), so the official `openai` SDK works
unchanged, plus `/v1/videos/{id}/events` (server-sent events), `/health` and `/metrics` (Prometheus).

The API only validates, queues and reads the store; workers (other processes, maybe other machines) run
the jobs. Every request is checked completely before its row is written, so a refused request queues
nothing.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse

from ltx_serve.jobs import Job, JobStore, QueueFullError
from ltx_serve.requests import ApiError, Limits, check_request, save_image
from ltx_serve.worker import remove_job_files, uploads_dir


@dataclass
class ApiConfig:
    """What the API needs: the store, the data folder, the request limits, the key and the queue bounds."""

    store: JobStore
    data_dir: Path
    limits: Limits = field(default_factory=Limits)
    api_key: str | None = None
    max_queued: int | None = 64
    max_attempts: int = 3
    retry_after_s: int = 10
    failures: dict[str, int] = field(default_factory=dict)
    """Refused requests by status code, for /metrics."""


def video_object(job: Job) -> dict[str, Any]:
    """The job as OpenAI's `Video` object, with our extension fields beside."""
    r = job.request
    status = job.status
    return {
        "id": job.id,
        "object": "video",
        "model": r.get("model", "ltx-2"),
        "status": status,
        "progress": job.progress,
        "created_at": int(job.created_at),
        "completed_at": int(job.completed_at) if job.completed_at and status in ("completed", "failed") else None,
        "expires_at": None,
        "prompt": r.get("prompt"),
        "seconds": f"{r['num_frames'] / r['frame_rate']:g}",
        "size": f"{r['width']}x{r['height']}",
        "error": job.error if status == "failed" else None,
        "remixed_from_video_id": None,
        # Extensions.
        "pipeline": r.get("pipeline"),
        "seed": r.get("seed"),
        "num_frames": r.get("num_frames"),
        "frame_rate": r.get("frame_rate"),
        "loras": {lora["name"]: lora["strength"] for lora in r.get("loras", ())},
        "attempts": job.attempts,
        "phase": job.phase,
        "step": job.step,
        "steps": job.steps,
    }


async def read_fields(request: Request, limits: Limits) -> tuple[dict[str, Any], bytes | None]:
    """The body's fields (JSON or multipart form) and the uploaded image's bytes, if any."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limits.max_body_bytes:
        raise ApiError(
            413,
            f"request body of {declared} bytes: over this server's limit of {limits.max_body_bytes}",
            code="request_too_large",
        )
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("multipart/form-data"):
        form = await request.form(max_part_size=limits.max_body_bytes)
        fields: dict[str, Any] = {}
        image = None
        for key, value in form.multi_items():
            if hasattr(value, "read"):
                if key != "input_reference":
                    raise ApiError(400, f"{key}: only input_reference may be a file", param=key)
                image = await value.read()
            else:
                fields[key] = value
        if isinstance(fields.get("input_reference"), str):
            fields["input_reference"] = json.loads(fields["input_reference"])
    else:
        body = await request.body()
        if len(body) > limits.max_body_bytes:
            raise ApiError(
                413,
                f"request body of {len(body)} bytes: over this server's limit of {limits.max_body_bytes}",
                code="request_too_large",
            )
        try:
            fields = json.loads(body or b"{}")
        except json.JSONDecodeError as e:
            raise ApiError(400, f"the body is not valid JSON ({e})") from None
        if not isinstance(fields, dict):
            raise ApiError(400, "the body must be a JSON object")
        image = None
    reference = fields.get("input_reference")
    if isinstance(reference, dict) and image is None:
        image = _data_url_image(reference)
    return fields, image


def _data_url_image(reference: dict[str, Any]) -> bytes:
    import base64

    url = reference.get("image_url")
    if not isinstance(url, str) or not url.startswith("data:image/") or ";base64," not in url:
        raise ApiError(
            400,
            "input_reference: this server takes an uploaded image or an image_url that is a "
            "base64 data URL (data:image/png;base64,...); it fetches nothing",
            param="input_reference",
        )
    try:
        return base64.b64decode(url.split(";base64,", 1)[1], validate=True)
    except ValueError:
        raise ApiError(400, "input_reference: the data URL is not valid base64", param="input_reference") from None


def create_app(config: ApiConfig) -> FastAPI:
    """The app over `config` (kept in `app.state`, where every handler reads it)."""
    app = FastAPI(title="ltx-serve", docs_url=None, redoc_url=None)
    app.state.config = config
    app.add_exception_handler(ApiError, api_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, validation_error)  # type: ignore[arg-type]
    app.middleware("http")(require_key)
    # The handlers are `async` on purpose: they all run on the event loop's one thread, so the store's single
    # connection never sees two transactions at once (sync handlers would run on a thread pool). Store calls
    # are short single-row statements; the heavy work is in the worker processes.
    for method, path, handler in (
        ("POST", "/v1/videos", create),
        ("GET", "/v1/videos", list_videos),
        ("GET", "/v1/videos/{video_id}", retrieve),
        ("GET", "/v1/videos/{video_id}/content", content),
        ("DELETE", "/v1/videos/{video_id}", delete),
        ("GET", "/v1/videos/{video_id}/events", events),
        ("GET", "/health", health),
        ("GET", "/metrics", metrics),
    ):
        app.add_api_route(path, handler, methods=[method])
    return app


def _config(request: Request) -> ApiConfig:
    return request.app.state.config


async def api_error(request: Request, error: ApiError) -> JSONResponse:
    refused = _config(request).failures
    refused[str(error.status)] = refused.get(str(error.status), 0) + 1
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


async def validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
    first = error.errors()[0] if error.errors() else {}
    param = ".".join(str(p) for p in first.get("loc", ())[1:]) or None
    return await api_error(request, ApiError(400, f"{param}: {first.get('msg', 'invalid value')}", param=param))


async def require_key(request: Request, call_next: Any) -> Response:
    api_key = _config(request).api_key
    if api_key is not None and request.url.path != "/health":
        given = request.headers.get("authorization", "")
        # Constant time: the comparison does not reveal how much of a guess was right.
        if not hmac.compare_digest(given.encode(), f"Bearer {api_key}".encode()):
            error = ApiError(
                401,
                "missing or wrong API key (Authorization: Bearer <key>)",
                code="invalid_api_key",
                type_="authentication_error",
            )
            return JSONResponse(error.body(), status_code=401)
    return await call_next(request)


def _visible(config: ApiConfig, video_id: str) -> Job:
    job = config.store.get(video_id)
    if job is None:
        raise ApiError(404, f"no video {video_id!r}", param="video_id", code="not_found")
    return job


async def create(request: Request) -> JSONResponse:
    config = _config(request)
    fields, image = await read_fields(request, config.limits)
    job_request, image = check_request(fields, config.limits, image)
    if image is not None:
        path = save_image(image, uploads_dir(config.data_dir), uuid.uuid4().hex)
        job_request["images"][0]["path"] = str(path)
    try:
        job, _ = config.store.enqueue(
            job_request,
            idempotency_key=request.headers.get("idempotency-key"),
            max_attempts=config.max_attempts,
            max_queued=config.max_queued,
        )
    except QueueFullError:
        raise ApiError(
            429,
            f"the queue is full ({config.max_queued} jobs waiting); retry later",
            code="queue_full",
            type_="rate_limit_error",
            headers={"Retry-After": str(config.retry_after_s)},
        ) from None
    return JSONResponse(video_object(job))


async def list_videos(request: Request, after: str | None = None, limit: int = 20, order: str = "desc") -> JSONResponse:
    if not 1 <= limit <= 100:
        raise ApiError(400, f"limit {limit}: accepted 1..100", param="limit")
    if order not in ("asc", "desc"):
        raise ApiError(400, f"order {order!r}: accepted asc, desc", param="order")
    jobs, more = _config(request).store.list(after=after, limit=limit, order=order)
    data = [video_object(j) for j in jobs]
    first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
    return JSONResponse({"object": "list", "data": data, "has_more": more, "first_id": first, "last_id": last})


async def retrieve(request: Request, video_id: str) -> JSONResponse:
    return JSONResponse(video_object(_visible(_config(request), video_id)))


async def content(request: Request, video_id: str, variant: str = "video") -> Response:
    job = _visible(_config(request), video_id)
    if variant != "video":
        raise ApiError(400, f"variant {variant!r}: this server has only 'video'", param="variant")
    if job.status != "completed" or job.output is None:
        raise ApiError(409, f"video {video_id!r} is {job.status}, not completed", code="video_not_ready")
    return FileResponse(job.output, media_type="video/mp4")


async def delete(request: Request, video_id: str) -> JSONResponse:
    config = _config(request)
    job = config.store.cancel(video_id)
    if job is None:
        raise ApiError(404, f"no video {video_id!r}", param="video_id", code="not_found")
    if job.status != "in_progress":  # a running job's worker removes its files when it stops
        remove_job_files(config.data_dir, job.id)
        config.store.purge(job.id)
    for image in job.request.get("images", ()):
        if image.get("path"):
            Path(image["path"]).unlink(missing_ok=True)
    return JSONResponse({"id": job.id, "object": "video.deleted", "deleted": True})


async def events(request: Request, video_id: str) -> StreamingResponse:
    """Server-sent events: one per change of status, stage, step or progress, until the job ends."""
    store = _config(request).store
    _visible(_config(request), video_id)

    async def stream() -> AsyncIterator[str]:
        last = None
        while True:
            job = store.get(video_id)
            if job is None:
                yield "event: deleted\ndata: {}\n\n"
                return
            state = (job.status, job.phase, job.step, job.progress)
            if state != last:
                last = state
                payload = {"id": job.id, "status": job.status, "stage": job.phase, "step": job.step,
                           "steps": job.steps, "progress": job.progress, "error": job.error}  # fmt: skip
                yield f"event: {job.status}\ndata: {json.dumps(payload)}\n\n"
            if job.status in ("completed", "failed"):
                return
            await asyncio.sleep(0.25)

    return StreamingResponse(stream(), media_type="text/event-stream")


async def health() -> JSONResponse:
    return JSONResponse({"status": "ok"})


async def metrics(request: Request) -> PlainTextResponse:
    config = _config(request)
    return PlainTextResponse(prometheus_text(config.store, config.failures))


def prometheus_text(store: JobStore, refused: dict[str, int]) -> str:
    """Jobs by status and queue depth (index counts), seconds per phase summed over completed jobs (a few
    rows the store keeps as jobs complete), refused requests by status code. No job row is read."""
    counts = store.counts()
    lines = ["# TYPE ltx_serve_jobs gauge"]
    for status in ("queued", "in_progress", "completed", "failed"):
        lines.append(f'ltx_serve_jobs{{status="{status}"}} {counts.get(status, 0)}')
    lines += ["# TYPE ltx_serve_queue_depth gauge", f"ltx_serve_queue_depth {counts.get('queued', 0)}"]
    lines += ["# TYPE ltx_serve_job_failures_total counter", f"ltx_serve_job_failures_total {counts.get('failed', 0)}"]
    lines.append("# TYPE ltx_serve_phase_seconds summary")
    for phase, (seconds, jobs) in sorted(store.phase_totals().items()):
        lines.append(f'ltx_serve_phase_seconds_sum{{phase="{phase}"}} {seconds:.3f}')
        lines.append(f'ltx_serve_phase_seconds_count{{phase="{phase}"}} {jobs}')
    lines.append("# TYPE ltx_serve_refused_requests_total counter")
    for status, count in sorted(refused.items()):
        lines.append(f'ltx_serve_refused_requests_total{{status="{status}"}} {count}')
    return "\n".join(lines) + "\n"
