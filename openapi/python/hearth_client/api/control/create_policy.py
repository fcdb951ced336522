from http import HTTPStatus
from typing import Any

import httpx

from ...client import AuthenticatedClient, Client
from ...models.control_policy import ControlPolicy
from ...models.error_body import ErrorBody
from ...models.policy_response import PolicyResponse
from ...types import Response


def _get_kwargs(
    *,
    body: ControlPolicy,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/control/policies",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> ErrorBody | PolicyResponse:
    if response.status_code == 200:
        response_200 = PolicyResponse.from_dict(response.json())

        return response_200

    if response.status_code == 201:
        response_201 = PolicyResponse.from_dict(response.json())

        return response_201

    if response.status_code == 400:
        response_400 = ErrorBody.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = ErrorBody.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = ErrorBody.from_dict(response.json())

        return response_403

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

    response_default = ErrorBody.from_dict(response.json())

    return response_default


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorBody | PolicyResponse]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: ControlPolicy,
) -> Response[ErrorBody | PolicyResponse]:
    """Registers a control policy.

     Registers a control policy (the JSON policy language of `hearth_control`:
    registers, inputs, init, max_steps, routes with straight-line bodies, an
    optional decision). It is validated (bounded lengths, no loops, registers
    and inputs in range) and immutable: registering the same name and version
    again answers the existing policy (200) if the body is the same, else 409.

    Args:
        body (ControlPolicy): A control policy: a deterministic transition over a session of u32
            registers, run per event as a chain of at most `max_steps` steps of straight-line route
            bodies. Semantics of each op: README, "Control policy language".

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | PolicyResponse]
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
    body: ControlPolicy,
) -> ErrorBody | PolicyResponse | None:
    """Registers a control policy.

     Registers a control policy (the JSON policy language of `hearth_control`:
    registers, inputs, init, max_steps, routes with straight-line bodies, an
    optional decision). It is validated (bounded lengths, no loops, registers
    and inputs in range) and immutable: registering the same name and version
    again answers the existing policy (200) if the body is the same, else 409.

    Args:
        body (ControlPolicy): A control policy: a deterministic transition over a session of u32
            registers, run per event as a chain of at most `max_steps` steps of straight-line route
            bodies. Semantics of each op: README, "Control policy language".

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | PolicyResponse
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: ControlPolicy,
) -> Response[ErrorBody | PolicyResponse]:
    """Registers a control policy.

     Registers a control policy (the JSON policy language of `hearth_control`:
    registers, inputs, init, max_steps, routes with straight-line bodies, an
    optional decision). It is validated (bounded lengths, no loops, registers
    and inputs in range) and immutable: registering the same name and version
    again answers the existing policy (200) if the body is the same, else 409.

    Args:
        body (ControlPolicy): A control policy: a deterministic transition over a session of u32
            registers, run per event as a chain of at most `max_steps` steps of straight-line route
            bodies. Semantics of each op: README, "Control policy language".

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | PolicyResponse]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: ControlPolicy,
) -> ErrorBody | PolicyResponse | None:
    """Registers a control policy.

     Registers a control policy (the JSON policy language of `hearth_control`:
    registers, inputs, init, max_steps, routes with straight-line bodies, an
    optional decision). It is validated (bounded lengths, no loops, registers
    and inputs in range) and immutable: registering the same name and version
    again answers the existing policy (200) if the body is the same, else 409.

    Args:
        body (ControlPolicy): A control policy: a deterministic transition over a session of u32
            registers, run per event as a chain of at most `max_steps` steps of straight-line route
            bodies. Semantics of each op: README, "Control policy language".

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | PolicyResponse
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
