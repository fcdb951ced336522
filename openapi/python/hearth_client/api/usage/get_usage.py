from http import HTTPStatus
from typing import Any

import httpx

from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.usage_response import UsageResponse
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    window_s: int | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["window_s"] = window_s

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/usage",
        "params": params,
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> ErrorBody | UsageResponse:
    if response.status_code == 200:
        response_200 = UsageResponse.from_dict(response.json())

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
) -> Response[ErrorBody | UsageResponse]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    window_s: int | Unset = UNSET,
) -> Response[ErrorBody | UsageResponse]:
    """The caller's tenant's usage over a window.

     Counts the jobs accepted in the last `window_s` seconds by state and by
    source, and the job-seconds and GPU-seconds they ran per profile (a job
    still running counts what it ran once it ends).

    Args:
        window_s (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | UsageResponse]
    """

    kwargs = _get_kwargs(
        window_s=window_s,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    window_s: int | Unset = UNSET,
) -> ErrorBody | UsageResponse | None:
    """The caller's tenant's usage over a window.

     Counts the jobs accepted in the last `window_s` seconds by state and by
    source, and the job-seconds and GPU-seconds they ran per profile (a job
    still running counts what it ran once it ends).

    Args:
        window_s (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | UsageResponse
    """

    return sync_detailed(
        client=client,
        window_s=window_s,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    window_s: int | Unset = UNSET,
) -> Response[ErrorBody | UsageResponse]:
    """The caller's tenant's usage over a window.

     Counts the jobs accepted in the last `window_s` seconds by state and by
    source, and the job-seconds and GPU-seconds they ran per profile (a job
    still running counts what it ran once it ends).

    Args:
        window_s (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | UsageResponse]
    """

    kwargs = _get_kwargs(
        window_s=window_s,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    window_s: int | Unset = UNSET,
) -> ErrorBody | UsageResponse | None:
    """The caller's tenant's usage over a window.

     Counts the jobs accepted in the last `window_s` seconds by state and by
    source, and the job-seconds and GPU-seconds they ran per profile (a job
    still running counts what it ran once it ends).

    Args:
        window_s (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | UsageResponse
    """

    return (
        await asyncio_detailed(
            client=client,
            window_s=window_s,
        )
    ).parsed
