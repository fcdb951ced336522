from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote
from uuid import UUID

import httpx

from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.server_sent_event import ServerSentEvent
from ...types import UNSET, Response, Unset


def _get_kwargs(
    id: UUID,
    *,
    after: int | Unset = UNSET,
    last_event_id: int | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(last_event_id, Unset):
        headers["Last-Event-ID"] = str(last_event_id)

    params: dict[str, Any] = {}

    params["after"] = after

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/jobs/{id}/events".format(
            id=quote(str(id), safe=""),
        ),
        "params": params,
    }

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Any | ErrorBody | ServerSentEvent | str:
    if response.status_code == 200:

        def _parse_response_200(data: object) -> ServerSentEvent | str:
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                response_200_type_1 = ServerSentEvent.from_dict(data)

                return response_200_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ServerSentEvent | str, data)

        response_200 = _parse_response_200(response.text)

        return response_200

    if response.status_code == 204:
        response_204 = cast(Any, None)
        return response_204

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
) -> Response[Any | ErrorBody | ServerSentEvent | str]:
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
    after: int | Unset = UNSET,
    last_event_id: int | Unset = UNSET,
) -> Response[Any | ErrorBody | ServerSentEvent | str]:
    """A job's events, live, as server-sent events.

     A job's events as server-sent events, from its acceptance (or from just
    after `Last-Event-ID`) to its end, on whichever replica: `state` on every
    state it enters, `output` for each line it prints, and finally `done`
    with the job object, after which the stream closes.

    Args:
        id (UUID):
        after (int | Unset):
        last_event_id (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | ErrorBody | ServerSentEvent | str]
    """

    kwargs = _get_kwargs(
        id=id,
        after=after,
        last_event_id=last_event_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: UUID,
    *,
    client: AuthenticatedClient,
    after: int | Unset = UNSET,
    last_event_id: int | Unset = UNSET,
) -> Any | ErrorBody | ServerSentEvent | str | None:
    """A job's events, live, as server-sent events.

     A job's events as server-sent events, from its acceptance (or from just
    after `Last-Event-ID`) to its end, on whichever replica: `state` on every
    state it enters, `output` for each line it prints, and finally `done`
    with the job object, after which the stream closes.

    Args:
        id (UUID):
        after (int | Unset):
        last_event_id (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | ErrorBody | ServerSentEvent | str
    """

    return sync_detailed(
        id=id,
        client=client,
        after=after,
        last_event_id=last_event_id,
    ).parsed


async def asyncio_detailed(
    id: UUID,
    *,
    client: AuthenticatedClient,
    after: int | Unset = UNSET,
    last_event_id: int | Unset = UNSET,
) -> Response[Any | ErrorBody | ServerSentEvent | str]:
    """A job's events, live, as server-sent events.

     A job's events as server-sent events, from its acceptance (or from just
    after `Last-Event-ID`) to its end, on whichever replica: `state` on every
    state it enters, `output` for each line it prints, and finally `done`
    with the job object, after which the stream closes.

    Args:
        id (UUID):
        after (int | Unset):
        last_event_id (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | ErrorBody | ServerSentEvent | str]
    """

    kwargs = _get_kwargs(
        id=id,
        after=after,
        last_event_id=last_event_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: UUID,
    *,
    client: AuthenticatedClient,
    after: int | Unset = UNSET,
    last_event_id: int | Unset = UNSET,
) -> Any | ErrorBody | ServerSentEvent | str | None:
    """A job's events, live, as server-sent events.

     A job's events as server-sent events, from its acceptance (or from just
    after `Last-Event-ID`) to its end, on whichever replica: `state` on every
    state it enters, `output` for each line it prints, and finally `done`
    with the job object, after which the stream closes.

    Args:
        id (UUID):
        after (int | Unset):
        last_event_id (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | ErrorBody | ServerSentEvent | str
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            after=after,
            last_event_id=last_event_id,
        )
    ).parsed
