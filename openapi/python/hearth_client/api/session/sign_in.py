from http import HTTPStatus
from typing import Any

import httpx

from ...client import AuthenticatedClient, Client
from ...models.console_session import ConsoleSession
from ...models.error_body import ErrorBody
from ...models.sign_in_request import SignInRequest
from ...types import Response


def _get_kwargs(
    *,
    body: SignInRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/session",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> ConsoleSession | ErrorBody:
    if response.status_code == 201:
        response_201 = ConsoleSession.from_dict(response.json())

        return response_201

    if response.status_code == 400:
        response_400 = ErrorBody.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = ErrorBody.from_dict(response.json())

        return response_401

    if response.status_code == 413:
        response_413 = ErrorBody.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = ErrorBody.from_dict(response.json())

        return response_415

    if response.status_code == 422:
        response_422 = ErrorBody.from_dict(response.json())

        return response_422

    response_default = ErrorBody.from_dict(response.json())

    return response_default


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ConsoleSession | ErrorBody]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: SignInRequest,
) -> Response[ConsoleSession | ErrorBody]:
    """Signs in to the web console.

     Exchanges an API key for a session cookie (`hearth_session`, `HttpOnly`,
    `SameSite=Strict`) that authenticates the tenant's requests in place of
    the key, and a CSRF token for the requests that change something. The
    session lasts `HEARTH_SESSION_TTL_S` seconds (an hour by default), and
    ends sooner on sign-out or when the key is revoked or expires.

    Args:
        body (SignInRequest): Sign-in: the API key to open a session with.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ConsoleSession | ErrorBody]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    body: SignInRequest,
) -> ConsoleSession | ErrorBody | None:
    """Signs in to the web console.

     Exchanges an API key for a session cookie (`hearth_session`, `HttpOnly`,
    `SameSite=Strict`) that authenticates the tenant's requests in place of
    the key, and a CSRF token for the requests that change something. The
    session lasts `HEARTH_SESSION_TTL_S` seconds (an hour by default), and
    ends sooner on sign-out or when the key is revoked or expires.

    Args:
        body (SignInRequest): Sign-in: the API key to open a session with.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ConsoleSession | ErrorBody
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: SignInRequest,
) -> Response[ConsoleSession | ErrorBody]:
    """Signs in to the web console.

     Exchanges an API key for a session cookie (`hearth_session`, `HttpOnly`,
    `SameSite=Strict`) that authenticates the tenant's requests in place of
    the key, and a CSRF token for the requests that change something. The
    session lasts `HEARTH_SESSION_TTL_S` seconds (an hour by default), and
    ends sooner on sign-out or when the key is revoked or expires.

    Args:
        body (SignInRequest): Sign-in: the API key to open a session with.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ConsoleSession | ErrorBody]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: SignInRequest,
) -> ConsoleSession | ErrorBody | None:
    """Signs in to the web console.

     Exchanges an API key for a session cookie (`hearth_session`, `HttpOnly`,
    `SameSite=Strict`) that authenticates the tenant's requests in place of
    the key, and a CSRF token for the requests that change something. The
    session lasts `HEARTH_SESSION_TTL_S` seconds (an hour by default), and
    ends sooner on sign-out or when the key is revoked or expires.

    Args:
        body (SignInRequest): Sign-in: the API key to open a session with.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ConsoleSession | ErrorBody
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
