"""Conveniences over the generated `hearth_client`, where users expect them.

The generated package is the SDK: one module per operation
(`hearth_client.api.jobs.create_job`, ...) and one class per schema
(`hearth_client.models.CreateJob`, ...). This module adds only what a
generator cannot: `connect` for an authenticated client, `ok` to turn an
`ErrorBody` answer into a `HearthError`, `run` to submit a job and wait for
its end, and `events` to iterate over a job's server-sent events.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any, TypeVar
from uuid import UUID

import httpx

from hearth_client import AuthenticatedClient
from hearth_client.api.jobs import create_job, get_job
from hearth_client.models import CreateJob, ErrorBody, JobResponse, ServerSentEvent, State
from hearth_client.types import Response

__all__ = ["FINISHED", "HearthError", "connect", "data", "events", "ok", "run"]

T = TypeVar("T")

#: The states a job does not leave.
FINISHED = frozenset({State.SUCCEEDED, State.FAILED, State.TIMED_OUT, State.CANCELLED})


class HearthError(Exception):
    """An error answer of the service: its HTTP status and `ErrorBody`."""

    def __init__(self, status: int, body: ErrorBody) -> None:
        super().__init__(f"{status} {body.code}: {body.message}")
        self.status = status
        self.body = body

    @property
    def code(self) -> str:
        """The stable error code (`not_found`, `validation_failed`, ...)."""
        return self.body.code


def connect(base_url: str, token: str, *, timeout: float = 120.0) -> AuthenticatedClient:
    """A client for `base_url` that sends `token` (an API key, a JWT or the
    admin token) as its bearer credentials."""
    return AuthenticatedClient(
        base_url=base_url,
        token=token,
        timeout=httpx.Timeout(timeout),
        raise_on_unexpected_status=True,
    )


def ok(response: Response[T | ErrorBody]) -> T:
    """The parsed body of a successful answer; raises `HearthError` for an
    error answer (an `ErrorBody`)."""
    parsed = response.parsed
    if isinstance(parsed, ErrorBody):
        raise HearthError(int(response.status_code), parsed)
    if parsed is None:
        raise HearthError(
            int(response.status_code),
            ErrorBody(code="unexpected_response", message=response.content.decode(errors="replace")),
        )
    return parsed


def run(
    client: AuthenticatedClient, job: CreateJob, *, wait: float = 60.0, deadline: float | None = None
) -> JobResponse:
    """Submits `job` and returns it once finished.

    The service waits up to `wait` seconds per request (it may cap it);
    while the job has not finished, its state is asked for again, with
    `wait`, until `deadline` seconds have passed (default: the job's
    `timeout_s` plus a minute). Returns the job as it stands then, finished
    or not: look at `state`.
    """
    if deadline is None:
        timeout_s = job.timeout_s if isinstance(job.timeout_s, int) else 60
        deadline = timeout_s + 60.0
    end = time.monotonic() + deadline
    current = ok(create_job.sync_detailed(client=client, body=job, wait=wait))
    while current.state not in FINISHED:
        left = end - time.monotonic()
        if left <= 0:
            break
        current = ok(get_job.sync_detailed(current.id, client=client, wait=min(wait, left)))
    return current


def events(client: AuthenticatedClient, job_id: UUID | str, *, after: int | None = None) -> Iterator[ServerSentEvent]:
    """The events of a job, as they happen: `state` for each state it
    enters, `output` for each line it prints, and last `done` with the job
    (the iteration ends there). `after`: resume after the event with this
    id. `ServerSentEvent.data` is JSON text; see `data`.
    """
    params = {} if after is None else {"after": str(after)}
    with client.get_httpx_client().stream(
        "GET", f"/v1/jobs/{job_id}/events", params=params, headers={"Accept": "text/event-stream"}
    ) as response:
        if response.status_code == 204:
            return
        if response.status_code >= 400:
            response.read()
            raise HearthError(response.status_code, ErrorBody.from_dict(response.json()))
        fields: dict[str, str] = {}
        data: list[str] = []
        for line in response.iter_lines():
            if line == "":
                if data:
                    event = ServerSentEvent(data="\n".join(data))
                    if "event" in fields:
                        event.event = fields["event"]
                    if "id" in fields:
                        event.id = fields["id"]
                    yield event
                    if fields.get("event") == "done":
                        return
                fields, data = {}, []
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data":
                data.append(value)
            elif name in ("event", "id"):
                fields[name] = value


def data(event: ServerSentEvent) -> Any:
    """An event's data, parsed from its JSON."""
    return json.loads(event.data)
