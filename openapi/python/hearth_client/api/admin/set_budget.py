from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ...client import AuthenticatedClient, Client
from ...models.budget_request import BudgetRequest
from ...models.budget_response import BudgetResponse
from ...models.error_body import ErrorBody
from ...types import Response


def _get_kwargs(
    tenant_id: UUID,
    profile: str,
    *,
    body: BudgetRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "put",
        "url": "/v1/admin/tenants/{tenant_id}/budgets/{profile}".format(
            tenant_id=quote(str(tenant_id), safe=""),
            profile=quote(str(profile), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> BudgetResponse | ErrorBody:
    if response.status_code == 200:
        response_200 = BudgetResponse.from_dict(response.json())

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
) -> Response[BudgetResponse | ErrorBody]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    tenant_id: UUID,
    profile: str,
    *,
    client: AuthenticatedClient,
    body: BudgetRequest,
) -> Response[BudgetResponse | ErrorBody]:
    """Sets a tenant's budget in one profile's pool.

     Sets a tenant's budget in one profile's pool; applied to the live pool at
    once and again at every start.

    Args:
        tenant_id (UUID):
        profile (str):
        body (BudgetRequest): Bounds of the GPUs a tenant's warm pods of one profile may hold.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BudgetResponse | ErrorBody]
    """

    kwargs = _get_kwargs(
        tenant_id=tenant_id,
        profile=profile,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    tenant_id: UUID,
    profile: str,
    *,
    client: AuthenticatedClient,
    body: BudgetRequest,
) -> BudgetResponse | ErrorBody | None:
    """Sets a tenant's budget in one profile's pool.

     Sets a tenant's budget in one profile's pool; applied to the live pool at
    once and again at every start.

    Args:
        tenant_id (UUID):
        profile (str):
        body (BudgetRequest): Bounds of the GPUs a tenant's warm pods of one profile may hold.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BudgetResponse | ErrorBody
    """

    return sync_detailed(
        tenant_id=tenant_id,
        profile=profile,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    tenant_id: UUID,
    profile: str,
    *,
    client: AuthenticatedClient,
    body: BudgetRequest,
) -> Response[BudgetResponse | ErrorBody]:
    """Sets a tenant's budget in one profile's pool.

     Sets a tenant's budget in one profile's pool; applied to the live pool at
    once and again at every start.

    Args:
        tenant_id (UUID):
        profile (str):
        body (BudgetRequest): Bounds of the GPUs a tenant's warm pods of one profile may hold.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BudgetResponse | ErrorBody]
    """

    kwargs = _get_kwargs(
        tenant_id=tenant_id,
        profile=profile,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    tenant_id: UUID,
    profile: str,
    *,
    client: AuthenticatedClient,
    body: BudgetRequest,
) -> BudgetResponse | ErrorBody | None:
    """Sets a tenant's budget in one profile's pool.

     Sets a tenant's budget in one profile's pool; applied to the live pool at
    once and again at every start.

    Args:
        tenant_id (UUID):
        profile (str):
        body (BudgetRequest): Bounds of the GPUs a tenant's warm pods of one profile may hold.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BudgetResponse | ErrorBody
    """

    return (
        await asyncio_detailed(
            tenant_id=tenant_id,
            profile=profile,
            client=client,
            body=body,
        )
    ).parsed
