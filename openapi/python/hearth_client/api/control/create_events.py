from http import HTTPStatus
from typing import Any

import httpx

from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.event_request import EventRequest
from ...models.events_response import EventsResponse
from ...types import Response


def _get_kwargs(
    *,
    body: EventRequest | list[EventRequest],
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/control/events",
    }

    if isinstance(body, EventRequest):
        _kwargs["json"] = body.to_dict()
    else:
        _kwargs["json"] = []
        for componentsschemas_event_batch_item_data in body:
            componentsschemas_event_batch_item = componentsschemas_event_batch_item_data.to_dict()
            _kwargs["json"].append(componentsschemas_event_batch_item)

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> ErrorBody | EventsResponse:
    if response.status_code == 200:
        response_200 = EventsResponse.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = ErrorBody.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = ErrorBody.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = ErrorBody.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = ErrorBody.from_dict(response.json())

        return response_404

    if response.status_code == 409:
        response_409 = ErrorBody.from_dict(response.json())

        return response_409

    if response.status_code == 413:
        response_413 = ErrorBody.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = ErrorBody.from_dict(response.json())

        return response_415

    if response.status_code == 422:
        response_422 = ErrorBody.from_dict(response.json())

        return response_422

    if response.status_code == 503:
        response_503 = ErrorBody.from_dict(response.json())

        return response_503

    response_default = ErrorBody.from_dict(response.json())

    return response_default


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorBody | EventsResponse]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: EventRequest | list[EventRequest],
) -> Response[ErrorBody | EventsResponse]:
    """Posts one event or an array of them and answers when every one has run.

     Posts one event or an array of them and answers when every one has run:
    in a batch of at least `K_r` events of its route on the active executor
    (launched before the earliest deadline in it), or alone on the CPU path
    when its deadline would pass first. Each result gives the new state, the
    next route, the effect and how it ran. With `Accept: application/x-ndjson`
    the results stream as one JSON line each, in completion order.

    Events of one session apply in the order they arrive (within an array,
    array order), whatever their routes: a session's event becomes ready when
    its previous one is done, and its deadline counts from then. An event
    without `route` starts on the route its predecessor chose.

    Durability follows the policy: `commit` (default) answers an event only
    once the session state it produced is committed (one commit per batch
    launch), so a crash loses no answered event, and a commit that keeps
    failing answers 503 instead; `snapshot` answers at once and may lose the
    answered events of the last `HEARTH_CONTROL_SNAPSHOT_S` on a crash.

    Args:
        body (EventRequest | list[EventRequest]): One event or an array of them.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | EventsResponse]
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
    body: EventRequest | list[EventRequest],
) -> ErrorBody | EventsResponse | None:
    """Posts one event or an array of them and answers when every one has run.

     Posts one event or an array of them and answers when every one has run:
    in a batch of at least `K_r` events of its route on the active executor
    (launched before the earliest deadline in it), or alone on the CPU path
    when its deadline would pass first. Each result gives the new state, the
    next route, the effect and how it ran. With `Accept: application/x-ndjson`
    the results stream as one JSON line each, in completion order.

    Events of one session apply in the order they arrive (within an array,
    array order), whatever their routes: a session's event becomes ready when
    its previous one is done, and its deadline counts from then. An event
    without `route` starts on the route its predecessor chose.

    Durability follows the policy: `commit` (default) answers an event only
    once the session state it produced is committed (one commit per batch
    launch), so a crash loses no answered event, and a commit that keeps
    failing answers 503 instead; `snapshot` answers at once and may lose the
    answered events of the last `HEARTH_CONTROL_SNAPSHOT_S` on a crash.

    Args:
        body (EventRequest | list[EventRequest]): One event or an array of them.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | EventsResponse
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: EventRequest | list[EventRequest],
) -> Response[ErrorBody | EventsResponse]:
    """Posts one event or an array of them and answers when every one has run.

     Posts one event or an array of them and answers when every one has run:
    in a batch of at least `K_r` events of its route on the active executor
    (launched before the earliest deadline in it), or alone on the CPU path
    when its deadline would pass first. Each result gives the new state, the
    next route, the effect and how it ran. With `Accept: application/x-ndjson`
    the results stream as one JSON line each, in completion order.

    Events of one session apply in the order they arrive (within an array,
    array order), whatever their routes: a session's event becomes ready when
    its previous one is done, and its deadline counts from then. An event
    without `route` starts on the route its predecessor chose.

    Durability follows the policy: `commit` (default) answers an event only
    once the session state it produced is committed (one commit per batch
    launch), so a crash loses no answered event, and a commit that keeps
    failing answers 503 instead; `snapshot` answers at once and may lose the
    answered events of the last `HEARTH_CONTROL_SNAPSHOT_S` on a crash.

    Args:
        body (EventRequest | list[EventRequest]): One event or an array of them.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | EventsResponse]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: EventRequest | list[EventRequest],
) -> ErrorBody | EventsResponse | None:
    """Posts one event or an array of them and answers when every one has run.

     Posts one event or an array of them and answers when every one has run:
    in a batch of at least `K_r` events of its route on the active executor
    (launched before the earliest deadline in it), or alone on the CPU path
    when its deadline would pass first. Each result gives the new state, the
    next route, the effect and how it ran. With `Accept: application/x-ndjson`
    the results stream as one JSON line each, in completion order.

    Events of one session apply in the order they arrive (within an array,
    array order), whatever their routes: a session's event becomes ready when
    its previous one is done, and its deadline counts from then. An event
    without `route` starts on the route its predecessor chose.

    Durability follows the policy: `commit` (default) answers an event only
    once the session state it produced is committed (one commit per batch
    launch), so a crash loses no answered event, and a commit that keeps
    failing answers 503 instead; `snapshot` answers at once and may lose the
    answered events of the last `HEARTH_CONTROL_SNAPSHOT_S` on a crash.

    Args:
        body (EventRequest | list[EventRequest]): One event or an array of them.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | EventsResponse
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
