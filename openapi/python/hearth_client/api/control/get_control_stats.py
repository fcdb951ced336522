from http import HTTPStatus
from typing import Any

import httpx

from ...client import AuthenticatedClient, Client
from ...models.control_stats_response import ControlStatsResponse
from ...models.error_body import ErrorBody
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    window_s: float | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["window_s"] = window_s

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/control/stats",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ControlStatsResponse | ErrorBody:
    if response.status_code == 200:
        response_200 = ControlStatsResponse.from_dict(response.json())

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
) -> Response[ControlStatsResponse | ErrorBody]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    window_s: float | Unset = UNSET,
) -> Response[ControlStatsResponse | ErrorBody]:
    """A, R_A, F, P* (or bounds of it), U and the operational figures of this tenant's events of the last
    `window_s` seconds.

     A, R_A, F, P* (or bounds of it), U and the operational figures of this
    tenant's events of the last `window_s` seconds. Never fails on a hard
    instance: when the exact P* search for per-event deadlines hits its cap
    (about 0.1–0.2 s of one core, at most twice), `exact` is false and
    `p_star_bounds` hold. Computed off the control engine on a snapshot of
    the log, one stats request at a time for the whole service.

    Args:
        window_s (float | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ControlStatsResponse | ErrorBody]
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
    window_s: float | Unset = UNSET,
) -> ControlStatsResponse | ErrorBody | None:
    """A, R_A, F, P* (or bounds of it), U and the operational figures of this tenant's events of the last
    `window_s` seconds.

     A, R_A, F, P* (or bounds of it), U and the operational figures of this
    tenant's events of the last `window_s` seconds. Never fails on a hard
    instance: when the exact P* search for per-event deadlines hits its cap
    (about 0.1–0.2 s of one core, at most twice), `exact` is false and
    `p_star_bounds` hold. Computed off the control engine on a snapshot of
    the log, one stats request at a time for the whole service.

    Args:
        window_s (float | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ControlStatsResponse | ErrorBody
    """

    return sync_detailed(
        client=client,
        window_s=window_s,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    window_s: float | Unset = UNSET,
) -> Response[ControlStatsResponse | ErrorBody]:
    """A, R_A, F, P* (or bounds of it), U and the operational figures of this tenant's events of the last
    `window_s` seconds.

     A, R_A, F, P* (or bounds of it), U and the operational figures of this
    tenant's events of the last `window_s` seconds. Never fails on a hard
    instance: when the exact P* search for per-event deadlines hits its cap
    (about 0.1–0.2 s of one core, at most twice), `exact` is false and
    `p_star_bounds` hold. Computed off the control engine on a snapshot of
    the log, one stats request at a time for the whole service.

    Args:
        window_s (float | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ControlStatsResponse | ErrorBody]
    """

    kwargs = _get_kwargs(
        window_s=window_s,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    window_s: float | Unset = UNSET,
) -> ControlStatsResponse | ErrorBody | None:
    """A, R_A, F, P* (or bounds of it), U and the operational figures of this tenant's events of the last
    `window_s` seconds.

     A, R_A, F, P* (or bounds of it), U and the operational figures of this
    tenant's events of the last `window_s` seconds. Never fails on a hard
    instance: when the exact P* search for per-event deadlines hits its cap
    (about 0.1–0.2 s of one core, at most twice), `exact` is false and
    `p_star_bounds` hold. Computed off the control engine on a snapshot of
    the log, one stats request at a time for the whole service.

    Args:
        window_s (float | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ControlStatsResponse | ErrorBody
    """

    return (
        await asyncio_detailed(
            client=client,
            window_s=window_s,
        )
    ).parsed
