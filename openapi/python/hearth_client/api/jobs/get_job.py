from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.job_response import JobResponse
from ...types import UNSET, Response, Unset


def _get_kwargs(
    id: UUID,
    *,
    wait: float | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["wait"] = wait

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/jobs/{id}".format(
            id=quote(str(id), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> ErrorBody | JobResponse:
    if response.status_code == 200:
        response_200 = JobResponse.from_dict(response.json())

        return response_200

    if response.status_code == 202:
        response_202 = JobResponse.from_dict(response.json())

        return response_202

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
) -> Response[ErrorBody | JobResponse]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    id: UUID,
    *,
    client: AuthenticatedClient,
    wait: float | Unset = UNSET,
) -> Response[ErrorBody | JobResponse]:
    """A job of this tenant.

     A job of this tenant. With `wait`, waits for it to finish like `create_job`.

    Args:
        id (UUID):
        wait (float | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | JobResponse]
    """

    kwargs = _get_kwargs(
        id=id,
        wait=wait,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: UUID,
    *,
    client: AuthenticatedClient,
    wait: float | Unset = UNSET,
) -> ErrorBody | JobResponse | None:
    """A job of this tenant.

     A job of this tenant. With `wait`, waits for it to finish like `create_job`.

    Args:
        id (UUID):
        wait (float | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | JobResponse
    """

    return sync_detailed(
        id=id,
        client=client,
        wait=wait,
    ).parsed


async def asyncio_detailed(
    id: UUID,
    *,
    client: AuthenticatedClient,
    wait: float | Unset = UNSET,
) -> Response[ErrorBody | JobResponse]:
    """A job of this tenant.

     A job of this tenant. With `wait`, waits for it to finish like `create_job`.

    Args:
        id (UUID):
        wait (float | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | JobResponse]
    """

    kwargs = _get_kwargs(
        id=id,
        wait=wait,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: UUID,
    *,
    client: AuthenticatedClient,
    wait: float | Unset = UNSET,
) -> ErrorBody | JobResponse | None:
    """A job of this tenant.

     A job of this tenant. With `wait`, waits for it to finish like `create_job`.

    Args:
        id (UUID):
        wait (float | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | JobResponse
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            wait=wait,
        )
    ).parsed
