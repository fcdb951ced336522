from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote
from uuid import UUID

import httpx

from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
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
        "method": "delete",
        "url": "/v1/control/sessions/{session}".format(
            session=quote(str(session), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Any | ErrorBody:
    if response.status_code == 204:
        response_204 = cast(Any, None)
        return response_204

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

    if response.status_code == 503:
        response_503 = ErrorBody.from_dict(response.json())

        return response_503

    response_default = ErrorBody.from_dict(response.json())

    return response_default


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Any | ErrorBody]:
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
) -> Response[Any | ErrorBody]:
    """Deletes a session with no event in flight, freeing its place in the tenant's session limit.

     Deletes a session with no event in flight, freeing its place in the
    tenant's session limit; an event naming it afterwards starts it afresh
    from the policy's `init`. Answered once the deletion is stored.

    Args:
        session (str):
        policy (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | ErrorBody]
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
) -> Any | ErrorBody | None:
    """Deletes a session with no event in flight, freeing its place in the tenant's session limit.

     Deletes a session with no event in flight, freeing its place in the
    tenant's session limit; an event naming it afterwards starts it afresh
    from the policy's `init`. Answered once the deletion is stored.

    Args:
        session (str):
        policy (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | ErrorBody
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
) -> Response[Any | ErrorBody]:
    """Deletes a session with no event in flight, freeing its place in the tenant's session limit.

     Deletes a session with no event in flight, freeing its place in the
    tenant's session limit; an event naming it afterwards starts it afresh
    from the policy's `init`. Answered once the deletion is stored.

    Args:
        session (str):
        policy (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | ErrorBody]
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
) -> Any | ErrorBody | None:
    """Deletes a session with no event in flight, freeing its place in the tenant's session limit.

     Deletes a session with no event in flight, freeing its place in the
    tenant's session limit; an event naming it afterwards starts it afresh
    from the policy's `init`. Answered once the deletion is stored.

    Args:
        session (str):
        policy (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | ErrorBody
    """

    return (
        await asyncio_detailed(
            session=session,
            client=client,
            policy=policy,
        )
    ).parsed
