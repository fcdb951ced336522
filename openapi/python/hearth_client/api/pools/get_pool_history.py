from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.pool_history_response import PoolHistoryResponse
from ...types import Response


def _get_kwargs(
    profile: str,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/pools/{profile}/history".format(
            profile=quote(str(profile), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | PoolHistoryResponse:
    if response.status_code == 200:
        response_200 = PoolHistoryResponse.from_dict(response.json())

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
) -> Response[ErrorBody | PoolHistoryResponse]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    profile: str,
    *,
    client: AuthenticatedClient,
) -> Response[ErrorBody | PoolHistoryResponse]:
    """GPUs the pool held over the last hour.

     The leading replica records what the pool holds (active, warm, standby,
    draining, in GPUs) every `step_s` seconds and keeps an hour of it. A new
    leader starts with none; a replica that does not lead answers none.

    Args:
        profile (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | PoolHistoryResponse]
    """

    kwargs = _get_kwargs(
        profile=profile,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    profile: str,
    *,
    client: AuthenticatedClient,
) -> ErrorBody | PoolHistoryResponse | None:
    """GPUs the pool held over the last hour.

     The leading replica records what the pool holds (active, warm, standby,
    draining, in GPUs) every `step_s` seconds and keeps an hour of it. A new
    leader starts with none; a replica that does not lead answers none.

    Args:
        profile (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | PoolHistoryResponse
    """

    return sync_detailed(
        profile=profile,
        client=client,
    ).parsed


async def asyncio_detailed(
    profile: str,
    *,
    client: AuthenticatedClient,
) -> Response[ErrorBody | PoolHistoryResponse]:
    """GPUs the pool held over the last hour.

     The leading replica records what the pool holds (active, warm, standby,
    draining, in GPUs) every `step_s` seconds and keeps an hour of it. A new
    leader starts with none; a replica that does not lead answers none.

    Args:
        profile (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | PoolHistoryResponse]
    """

    kwargs = _get_kwargs(
        profile=profile,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    profile: str,
    *,
    client: AuthenticatedClient,
) -> ErrorBody | PoolHistoryResponse | None:
    """GPUs the pool held over the last hour.

     The leading replica records what the pool holds (active, warm, standby,
    draining, in GPUs) every `step_s` seconds and keeps an hour of it. A new
    leader starts with none; a replica that does not lead answers none.

    Args:
        profile (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | PoolHistoryResponse
    """

    return (
        await asyncio_detailed(
            profile=profile,
            client=client,
        )
    ).parsed
