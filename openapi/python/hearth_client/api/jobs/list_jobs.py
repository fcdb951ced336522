import datetime
from http import HTTPStatus
from typing import Any
from uuid import UUID

import httpx

from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.kind import Kind
from ...models.list_jobs_response import ListJobsResponse
from ...models.state import State
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    state: State | Unset = UNSET,
    kind: Kind | Unset = UNSET,
    caller: str | Unset = UNSET,
    profile: str | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: UUID | Unset = UNSET,
    id_prefix: str | Unset = UNSET,
    created_after: datetime.datetime | Unset = UNSET,
    created_before: datetime.datetime | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_state: str | Unset = UNSET
    if not isinstance(state, Unset):
        json_state = state.value

    params["state"] = json_state

    json_kind: str | Unset = UNSET
    if not isinstance(kind, Unset):
        json_kind = kind.value

    params["kind"] = json_kind

    params["caller"] = caller

    params["profile"] = profile

    params["limit"] = limit

    json_cursor: str | Unset = UNSET
    if not isinstance(cursor, Unset):
        json_cursor = str(cursor)
    params["cursor"] = json_cursor

    params["id_prefix"] = id_prefix

    json_created_after: str | Unset = UNSET
    if not isinstance(created_after, Unset):
        json_created_after = created_after.isoformat()
    params["created_after"] = json_created_after

    json_created_before: str | Unset = UNSET
    if not isinstance(created_before, Unset):
        json_created_before = created_before.isoformat()
    params["created_before"] = json_created_before

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/jobs",
        "params": params,
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> ErrorBody | ListJobsResponse:
    if response.status_code == 200:
        response_200 = ListJobsResponse.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = ErrorBody.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = ErrorBody.from_dict(response.json())

        return response_401

    response_default = ErrorBody.from_dict(response.json())

    return response_default


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorBody | ListJobsResponse]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    state: State | Unset = UNSET,
    kind: Kind | Unset = UNSET,
    caller: str | Unset = UNSET,
    profile: str | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: UUID | Unset = UNSET,
    id_prefix: str | Unset = UNSET,
    created_after: datetime.datetime | Unset = UNSET,
    created_before: datetime.datetime | Unset = UNSET,
) -> Response[ErrorBody | ListJobsResponse]:
    """This tenant's jobs, newest first, with keyset pagination.

     This tenant's jobs, newest first, with keyset pagination.

    Args:
        state (State | Unset): A job's lifecycle: `queued -> assigned -> running -> succeeded |
            failed |
            timed_out | cancelled`. A job may also be cancelled or failed before it
            runs, and goes back to `queued` when its pods are lost while it has
            attempts left. The service moves a job along these transitions only.
        kind (Kind | Unset): What a job is for. The kinds run the same way; they are kept apart
            for
            accounting, filtering and policy.
        caller (str | Unset):
        profile (str | Unset):
        limit (int | Unset):
        cursor (UUID | Unset):
        id_prefix (str | Unset):
        created_after (datetime.datetime | Unset):
        created_before (datetime.datetime | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | ListJobsResponse]
    """

    kwargs = _get_kwargs(
        state=state,
        kind=kind,
        caller=caller,
        profile=profile,
        limit=limit,
        cursor=cursor,
        id_prefix=id_prefix,
        created_after=created_after,
        created_before=created_before,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    state: State | Unset = UNSET,
    kind: Kind | Unset = UNSET,
    caller: str | Unset = UNSET,
    profile: str | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: UUID | Unset = UNSET,
    id_prefix: str | Unset = UNSET,
    created_after: datetime.datetime | Unset = UNSET,
    created_before: datetime.datetime | Unset = UNSET,
) -> ErrorBody | ListJobsResponse | None:
    """This tenant's jobs, newest first, with keyset pagination.

     This tenant's jobs, newest first, with keyset pagination.

    Args:
        state (State | Unset): A job's lifecycle: `queued -> assigned -> running -> succeeded |
            failed |
            timed_out | cancelled`. A job may also be cancelled or failed before it
            runs, and goes back to `queued` when its pods are lost while it has
            attempts left. The service moves a job along these transitions only.
        kind (Kind | Unset): What a job is for. The kinds run the same way; they are kept apart
            for
            accounting, filtering and policy.
        caller (str | Unset):
        profile (str | Unset):
        limit (int | Unset):
        cursor (UUID | Unset):
        id_prefix (str | Unset):
        created_after (datetime.datetime | Unset):
        created_before (datetime.datetime | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | ListJobsResponse
    """

    return sync_detailed(
        client=client,
        state=state,
        kind=kind,
        caller=caller,
        profile=profile,
        limit=limit,
        cursor=cursor,
        id_prefix=id_prefix,
        created_after=created_after,
        created_before=created_before,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    state: State | Unset = UNSET,
    kind: Kind | Unset = UNSET,
    caller: str | Unset = UNSET,
    profile: str | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: UUID | Unset = UNSET,
    id_prefix: str | Unset = UNSET,
    created_after: datetime.datetime | Unset = UNSET,
    created_before: datetime.datetime | Unset = UNSET,
) -> Response[ErrorBody | ListJobsResponse]:
    """This tenant's jobs, newest first, with keyset pagination.

     This tenant's jobs, newest first, with keyset pagination.

    Args:
        state (State | Unset): A job's lifecycle: `queued -> assigned -> running -> succeeded |
            failed |
            timed_out | cancelled`. A job may also be cancelled or failed before it
            runs, and goes back to `queued` when its pods are lost while it has
            attempts left. The service moves a job along these transitions only.
        kind (Kind | Unset): What a job is for. The kinds run the same way; they are kept apart
            for
            accounting, filtering and policy.
        caller (str | Unset):
        profile (str | Unset):
        limit (int | Unset):
        cursor (UUID | Unset):
        id_prefix (str | Unset):
        created_after (datetime.datetime | Unset):
        created_before (datetime.datetime | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | ListJobsResponse]
    """

    kwargs = _get_kwargs(
        state=state,
        kind=kind,
        caller=caller,
        profile=profile,
        limit=limit,
        cursor=cursor,
        id_prefix=id_prefix,
        created_after=created_after,
        created_before=created_before,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    state: State | Unset = UNSET,
    kind: Kind | Unset = UNSET,
    caller: str | Unset = UNSET,
    profile: str | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: UUID | Unset = UNSET,
    id_prefix: str | Unset = UNSET,
    created_after: datetime.datetime | Unset = UNSET,
    created_before: datetime.datetime | Unset = UNSET,
) -> ErrorBody | ListJobsResponse | None:
    """This tenant's jobs, newest first, with keyset pagination.

     This tenant's jobs, newest first, with keyset pagination.

    Args:
        state (State | Unset): A job's lifecycle: `queued -> assigned -> running -> succeeded |
            failed |
            timed_out | cancelled`. A job may also be cancelled or failed before it
            runs, and goes back to `queued` when its pods are lost while it has
            attempts left. The service moves a job along these transitions only.
        kind (Kind | Unset): What a job is for. The kinds run the same way; they are kept apart
            for
            accounting, filtering and policy.
        caller (str | Unset):
        profile (str | Unset):
        limit (int | Unset):
        cursor (UUID | Unset):
        id_prefix (str | Unset):
        created_after (datetime.datetime | Unset):
        created_before (datetime.datetime | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | ListJobsResponse
    """

    return (
        await asyncio_detailed(
            client=client,
            state=state,
            kind=kind,
            caller=caller,
            profile=profile,
            limit=limit,
            cursor=cursor,
            id_prefix=id_prefix,
            created_after=created_after,
            created_before=created_before,
        )
    ).parsed
