"""The Python SDK against the live service (openapi/test-live.sh starts it:
real Postgres, real pods). HEARTH_URL, HEARTH_TOKEN (a tenant's API key) and
HEARTH_ADMIN_TOKEN come from there."""

from __future__ import annotations

import os
import uuid
from uuid import UUID

import pytest

import hearth
from hearth_client import AuthenticatedClient
from hearth_client.api.admin import create_tenant
from hearth_client.api.control import (
    create_events,
    create_policy,
    create_session,
    delete_session,
    get_session,
    list_sessions,
)
from hearth_client.api.jobs import cancel_job, create_job, create_jobs, get_job, list_jobs
from hearth_client.api.pools import get_pool, list_pools
from hearth_client.models import (
    BatchItem,
    BatchRequest,
    CodeFiles,
    CodeFilesFiles,
    ControlPolicy,
    CreateJob,
    CreateSessionRequest,
    ErrorBody,
    EventRequest,
    Kind,
    State,
    TenantRequest,
)
from hearth_client.types import UNSET, Unset


@pytest.fixture(scope="module")
def client() -> AuthenticatedClient:
    return hearth.connect(os.environ["HEARTH_URL"], os.environ["HEARTH_TOKEN"])


def python_job(caller: str, code: str, **extra: object) -> CreateJob:
    job = CreateJob(
        kind=Kind.TOOL_CALL,
        profile="cpu-small",
        caller=caller,
        command=["python3", "main.py"],
        code=CodeFiles(files=CodeFilesFiles.from_dict({"main.py": code})),
        timeout_s=60,
    )
    for name, value in extra.items():
        setattr(job, name, value)
    return job


DOUBLE = """
import json, os, sys
data = json.load(sys.stdin)
print("got", data["x"])
with open(os.environ["HEARTH_OUTPUT"], "w") as f:
    json.dump({"double": data["x"] * 2}, f)
"""


def test_run_submits_code_files_and_input_and_returns_the_output(client: AuthenticatedClient) -> None:
    job = hearth.run(client, python_job("sdk-py", DOUBLE, input_={"x": 21}))
    assert job.state == State.SUCCEEDED, job
    assert job.output == {"double": 42}
    assert job.stdout == "got 21\n"
    assert job.exit_code == 0
    assert job.kind == Kind.TOOL_CALL


def test_a_batch_runs_together_and_each_item_is_idempotent(client: AuthenticatedClient) -> None:
    items = [
        BatchItem(job=python_job("sdk-batch", DOUBLE, input_={"x": i}), idempotency_key=f"sdk-step-{i}")
        for i in range(3)
    ]
    done = hearth.ok(create_jobs.sync_detailed(client=client, body=BatchRequest(jobs=items), wait=60))
    assert [j.output for j in done.jobs] == [{"double": 0}, {"double": 2}, {"double": 4}]
    assert all(j.state == State.SUCCEEDED for j in done.jobs)
    again = hearth.ok(create_jobs.sync_detailed(client=client, body=BatchRequest(jobs=items), wait=60))
    assert [j.id for j in again.jobs] == [j.id for j in done.jobs]


def test_list_filters_and_pages_with_a_cursor(client: AuthenticatedClient) -> None:
    caller = f"sdk-list-{uuid.uuid4().hex[:8]}"
    ids: list[UUID] = []
    for i in range(3):
        job = hearth.run(client, python_job(caller, f"print({i})"))
        assert job.state == State.SUCCEEDED
        ids.append(job.id)
    seen: list[UUID] = []
    cursor: UUID | Unset = UNSET
    while True:
        page = hearth.ok(
            list_jobs.sync_detailed(
                client=client,
                caller=caller,
                state=State.SUCCEEDED,
                kind=Kind.TOOL_CALL,
                limit=2,
                cursor=cursor,
            )
        )
        assert len(page.jobs) <= 2
        seen.extend(j.id for j in page.jobs)
        if not isinstance(page.next_cursor, UUID):
            break
        cursor = page.next_cursor
    assert seen == list(reversed(ids)), "newest first, every job once"
    none = hearth.ok(list_jobs.sync_detailed(client=client, caller=caller, state=State.FAILED))
    assert none.jobs == []


def test_events_stream_states_output_and_the_finished_job(client: AuthenticatedClient) -> None:
    job = hearth.ok(create_job.sync_detailed(client=client, body=python_job("sdk-py", "print('one')\nprint('two')")))
    events = list(hearth.events(client, job.id))
    names = [e.event for e in events]
    assert names[-1] == "done", names
    assert "state" in names
    lines = [hearth.data(e)["line"] for e in events if e.event == "output"]
    assert lines == ["one", "two"]
    assert hearth.data(events[-1])["state"] == "succeeded"
    # Resuming after an event replays only what followed it.
    first = events[0]
    assert isinstance(first.id, str)
    rest = list(hearth.events(client, job.id, after=int(first.id)))
    assert [e.id for e in rest] == [e.id for e in events[1:]]


def test_cancel_a_running_job(client: AuthenticatedClient) -> None:
    job = hearth.ok(
        create_job.sync_detailed(client=client, body=python_job("sdk-cancel", "import time\ntime.sleep(120)"))
    )
    for event in hearth.events(client, job.id):
        if event.event == "state" and hearth.data(event)["state"] == "running":
            break
    hearth.ok(cancel_job.sync_detailed(job.id, client=client))
    done = hearth.ok(get_job.sync_detailed(job.id, client=client, wait=30))
    assert done.state == State.CANCELLED
    # Cancelling it again: a typed 409.
    with pytest.raises(hearth.HearthError) as refused:
        hearth.ok(cancel_job.sync_detailed(job.id, client=client))
    assert refused.value.status == 409
    assert refused.value.code == "job_finished"


def test_pools(client: AuthenticatedClient) -> None:
    pools = hearth.ok(list_pools.sync_detailed(client=client))
    profiles = [p.profile for p in pools.pools]
    assert "cpu-small" in profiles
    pool = hearth.ok(get_pool.sync_detailed("cpu-small", client=client))
    assert pool.profile == "cpu-small"


def test_errors_arrive_as_error_body(client: AuthenticatedClient) -> None:
    missing = get_job.sync_detailed(uuid.uuid4(), client=client)
    assert missing.status_code == 404
    assert isinstance(missing.parsed, ErrorBody)
    assert missing.parsed.code == "not_found"

    invalid = create_job.sync_detailed(client=client, body=python_job("sdk-py", "print(1)", profile="no-such-profile"))
    assert invalid.status_code == 422
    assert isinstance(invalid.parsed, ErrorBody)
    assert invalid.parsed.code == "unknown_profile"

    anonymous = hearth.connect(os.environ["HEARTH_URL"], "hk_not_a_key")
    with pytest.raises(hearth.HearthError) as unauthorized:
        hearth.ok(list_pools.sync_detailed(client=anonymous))
    assert unauthorized.value.status == 401
    assert unauthorized.value.code == "unauthorized"

    admin = hearth.connect(os.environ["HEARTH_URL"], os.environ["HEARTH_ADMIN_TOKEN"])
    name = f"sdk-{uuid.uuid4().hex[:8]}"
    hearth.ok(create_tenant.sync_detailed(client=admin, body=TenantRequest(name=name)))
    duplicate = create_tenant.sync_detailed(client=admin, body=TenantRequest(name=name))
    assert duplicate.status_code == 409
    assert isinstance(duplicate.parsed, ErrorBody)


# A small control policy: one register counting the events of a session.
COUNTER = {
    "name": "sdk-counter",
    "version": 1,
    "registers": 1,
    "inputs": 1,
    "routes": [{"name": "count", "body": [{"op": "add", "dst": 0, "a": {"reg": 0}, "b": {"input": 0}}]}],
}


def test_control_sessions_are_created_used_and_deleted(client: AuthenticatedClient) -> None:
    policy = hearth.ok(create_policy.sync_detailed(client=client, body=ControlPolicy.from_dict(COUNTER)))
    created = hearth.ok(
        create_session.sync_detailed(
            client=client, body=CreateSessionRequest(policy=policy.policy_id, session="sdk-s", state=[5])
        )
    )
    assert created.state == [5]
    ran = hearth.ok(
        create_events.sync_detailed(
            client=client, body=EventRequest(policy=policy.policy_id, session="sdk-s", input_=[2], deadline_ms=1)
        )
    )
    assert ran.results[0].state == [7]
    assert hearth.ok(get_session.sync_detailed("sdk-s", client=client, policy=policy.policy_id)).state == [7]

    listed = hearth.ok(list_sessions.sync_detailed(client=client, policy=policy.policy_id, limit=10))
    assert [s.session for s in listed.sessions] == ["sdk-s"]
    assert listed.sessions[0].state == [7]
    assert listed.held >= 1 and listed.max_sessions >= listed.held

    deleted = delete_session.sync_detailed("sdk-s", client=client, policy=policy.policy_id)
    assert deleted.status_code == 204
    gone = get_session.sync_detailed("sdk-s", client=client, policy=policy.policy_id)
    assert gone.status_code == 404
    assert isinstance(gone.parsed, ErrorBody)
    assert gone.parsed.code == "not_found"
    again = delete_session.sync_detailed("sdk-s", client=client, policy=policy.policy_id)
    assert again.status_code == 404
