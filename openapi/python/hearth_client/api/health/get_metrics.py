from http import HTTPStatus
from typing import Any

import httpx

from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...types import Response


def _get_kwargs() -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/metrics",
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> ErrorBody | str:
    if response.status_code == 200:
        response_200 = response.text
        return response_200

    response_default = ErrorBody.from_dict(response.json())

    return response_default


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[ErrorBody | str]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
) -> Response[ErrorBody | str]:
    """The service's metrics, for Prometheus.

     Jobs by start source, start latency by source (with the trace of a job in
    each bucket as an exemplar), pods by state, GPU-seconds held by pod
    state, budget and queue depth. OpenMetrics text when `Accept` lists
    `application/openmetrics-text`, else the Prometheus text format.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | str]
    """

    kwargs = _get_kwargs()

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
) -> ErrorBody | str | None:
    """The service's metrics, for Prometheus.

     Jobs by start source, start latency by source (with the trace of a job in
    each bucket as an exemplar), pods by state, GPU-seconds held by pod
    state, budget and queue depth. OpenMetrics text when `Accept` lists
    `application/openmetrics-text`, else the Prometheus text format.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | str
    """

    return sync_detailed(
        client=client,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
) -> Response[ErrorBody | str]:
    """The service's metrics, for Prometheus.

     Jobs by start source, start latency by source (with the trace of a job in
    each bucket as an exemplar), pods by state, GPU-seconds held by pod
    state, budget and queue depth. OpenMetrics text when `Accept` lists
    `application/openmetrics-text`, else the Prometheus text format.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | str]
    """

    kwargs = _get_kwargs()

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
) -> ErrorBody | str | None:
    """The service's metrics, for Prometheus.

     Jobs by start source, start latency by source (with the trace of a job in
    each bucket as an exemplar), pods by state, GPU-seconds held by pod
    state, budget and queue depth. OpenMetrics text when `Accept` lists
    `application/openmetrics-text`, else the Prometheus text format.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | str
    """

    return (
        await asyncio_detailed(
            client=client,
        )
    ).parsed
