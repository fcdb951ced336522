from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.session_response import SessionResponse
from ...types import UNSET, Response


def _get_kwargs(
    session: str,
    *,
    policy: UUID,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_policy = str(policy)
    params["policy"] = json_policy

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/control/sessions/{session}".format(
            session=quote(str(session), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> ErrorBody | SessionResponse:
    if response.status_code == 200:
        response_200 = SessionResponse.from_dict(response.json())

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
) -> Response[ErrorBody | SessionResponse]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    session: str,
    *,
    client: AuthenticatedClient,
    policy: UUID,
) -> Response[ErrorBody | SessionResponse]:
    """A session's current state and next route.

     A session's current state and next route.

    Args:
        session (str):
        policy (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | SessionResponse]
    """

    kwargs = _get_kwargs(
        session=session,
        policy=policy,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    session: str,
    *,
    client: AuthenticatedClient,
    policy: UUID,
) -> ErrorBody | SessionResponse | None:
    """A session's current state and next route.

     A session's current state and next route.

    Args:
        session (str):
        policy (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | SessionResponse
    """

    return sync_detailed(
        session=session,
        client=client,
        policy=policy,
    ).parsed


async def asyncio_detailed(
    session: str,
    *,
    client: AuthenticatedClient,
    policy: UUID,
) -> Response[ErrorBody | SessionResponse]:
    """A session's current state and next route.

     A session's current state and next route.

    Args:
        session (str):
        policy (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | SessionResponse]
    """

    kwargs = _get_kwargs(
        session=session,
        policy=policy,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    session: str,
    *,
    client: AuthenticatedClient,
    policy: UUID,
) -> ErrorBody | SessionResponse | None:
    """A session's current state and next route.

     A session's current state and next route.

    Args:
        session (str):
        policy (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | SessionResponse
    """

    return (
        await asyncio_detailed(
            session=session,
            client=client,
            policy=policy,
        )
    ).parsed
