from http import HTTPStatus
from typing import Any
from uuid import UUID

import httpx

from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.list_sessions_response import ListSessionsResponse
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    policy: UUID,
    cursor: str | Unset = UNSET,
    limit: int | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_policy = str(policy)
    params["policy"] = json_policy

    params["cursor"] = cursor

    params["limit"] = limit

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/control/sessions",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | ListSessionsResponse:
    if response.status_code == 200:
        response_200 = ListSessionsResponse.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = ErrorBody.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = ErrorBody.from_dict(response.json())

        return response_401

    if response.status_code == 404:
        response_404 = ErrorBody.from_dict(response.json())

        return response_404

    response_default = ErrorBody.from_dict(response.json())

    return response_default


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorBody | ListSessionsResponse]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    policy: UUID,
    cursor: str | Unset = UNSET,
    limit: int | Unset = UNSET,
) -> Response[ErrorBody | ListSessionsResponse]:
    """A policy's sessions by name, as stored.

     A policy's sessions by name, as stored: a `commit` policy's as they are,
    a `snapshot` policy's as of its last snapshot (`HEARTH_CONTROL_SNAPSHOT_S`;
    a session its first event created since is listed from the next). With
    `held` against `max_sessions`, what to delete to make room.

    Args:
        policy (UUID):
        cursor (str | Unset):
        limit (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | ListSessionsResponse]
    """

    kwargs = _get_kwargs(
        policy=policy,
        cursor=cursor,
        limit=limit,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    policy: UUID,
    cursor: str | Unset = UNSET,
    limit: int | Unset = UNSET,
) -> ErrorBody | ListSessionsResponse | None:
    """A policy's sessions by name, as stored.

     A policy's sessions by name, as stored: a `commit` policy's as they are,
    a `snapshot` policy's as of its last snapshot (`HEARTH_CONTROL_SNAPSHOT_S`;
    a session its first event created since is listed from the next). With
    `held` against `max_sessions`, what to delete to make room.

    Args:
        policy (UUID):
        cursor (str | Unset):
        limit (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | ListSessionsResponse
    """

    return sync_detailed(
        client=client,
        policy=policy,
        cursor=cursor,
        limit=limit,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    policy: UUID,
    cursor: str | Unset = UNSET,
    limit: int | Unset = UNSET,
) -> Response[ErrorBody | ListSessionsResponse]:
    """A policy's sessions by name, as stored.

     A policy's sessions by name, as stored: a `commit` policy's as they are,
    a `snapshot` policy's as of its last snapshot (`HEARTH_CONTROL_SNAPSHOT_S`;
    a session its first event created since is listed from the next). With
    `held` against `max_sessions`, what to delete to make room.

    Args:
        policy (UUID):
        cursor (str | Unset):
        limit (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | ListSessionsResponse]
    """

    kwargs = _get_kwargs(
        policy=policy,
        cursor=cursor,
        limit=limit,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    policy: UUID,
    cursor: str | Unset = UNSET,
    limit: int | Unset = UNSET,
) -> ErrorBody | ListSessionsResponse | None:
    """A policy's sessions by name, as stored.

     A policy's sessions by name, as stored: a `commit` policy's as they are,
    a `snapshot` policy's as of its last snapshot (`HEARTH_CONTROL_SNAPSHOT_S`;
    a session its first event created since is listed from the next). With
    `held` against `max_sessions`, what to delete to make room.

    Args:
        policy (UUID):
        cursor (str | Unset):
        limit (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | ListSessionsResponse
    """

    return (
        await asyncio_detailed(
            client=client,
            policy=policy,
            cursor=cursor,
            limit=limit,
        )
    ).parsed
