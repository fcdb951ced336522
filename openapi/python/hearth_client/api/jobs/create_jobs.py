from http import HTTPStatus
from typing import Any

import httpx

from ...client import AuthenticatedClient, Client
from ...models.batch_request import BatchRequest
from ...models.batch_response import BatchResponse
from ...models.error_body import ErrorBody
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    body: BatchRequest,
    wait: float | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    params: dict[str, Any] = {}

    params["wait"] = wait

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/jobs/batch",
        "params": params,
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> BatchResponse | ErrorBody:
    if response.status_code == 200:
        response_200 = BatchResponse.from_dict(response.json())

        return response_200

    if response.status_code == 202:
        response_202 = BatchResponse.from_dict(response.json())

        return response_202

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
) -> Response[BatchResponse | ErrorBody]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: BatchRequest,
    wait: float | Unset = UNSET,
) -> Response[BatchResponse | ErrorBody]:
    """Submits up to 1,000 jobs at once: all accepted, or none.

     Every job is validated as `POST /v1/jobs` validates one; if any fails,
    nothing is accepted and the answer lists every failing field as
    `jobs[i].<field>`. Otherwise all are accepted in one transaction. A job
    whose `idempotency_key` was used before with the same job is the earlier
    job (not accepted again); with another job, the whole batch is refused
    (409). With `wait`, answers once every job is final (200) or when the
    wait runs out (202, the jobs as they stand).

    Args:
        wait (float | Unset):
        body (BatchRequest): Jobs to accept together.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BatchResponse | ErrorBody]
    """

    kwargs = _get_kwargs(
        body=body,
        wait=wait,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    body: BatchRequest,
    wait: float | Unset = UNSET,
) -> BatchResponse | ErrorBody | None:
    """Submits up to 1,000 jobs at once: all accepted, or none.

     Every job is validated as `POST /v1/jobs` validates one; if any fails,
    nothing is accepted and the answer lists every failing field as
    `jobs[i].<field>`. Otherwise all are accepted in one transaction. A job
    whose `idempotency_key` was used before with the same job is the earlier
    job (not accepted again); with another job, the whole batch is refused
    (409). With `wait`, answers once every job is final (200) or when the
    wait runs out (202, the jobs as they stand).

    Args:
        wait (float | Unset):
        body (BatchRequest): Jobs to accept together.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BatchResponse | ErrorBody
    """

    return sync_detailed(
        client=client,
        body=body,
        wait=wait,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: BatchRequest,
    wait: float | Unset = UNSET,
) -> Response[BatchResponse | ErrorBody]:
    """Submits up to 1,000 jobs at once: all accepted, or none.

     Every job is validated as `POST /v1/jobs` validates one; if any fails,
    nothing is accepted and the answer lists every failing field as
    `jobs[i].<field>`. Otherwise all are accepted in one transaction. A job
    whose `idempotency_key` was used before with the same job is the earlier
    job (not accepted again); with another job, the whole batch is refused
    (409). With `wait`, answers once every job is final (200) or when the
    wait runs out (202, the jobs as they stand).

    Args:
        wait (float | Unset):
        body (BatchRequest): Jobs to accept together.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BatchResponse | ErrorBody]
    """

    kwargs = _get_kwargs(
        body=body,
        wait=wait,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: BatchRequest,
    wait: float | Unset = UNSET,
) -> BatchResponse | ErrorBody | None:
    """Submits up to 1,000 jobs at once: all accepted, or none.

     Every job is validated as `POST /v1/jobs` validates one; if any fails,
    nothing is accepted and the answer lists every failing field as
    `jobs[i].<field>`. Otherwise all are accepted in one transaction. A job
    whose `idempotency_key` was used before with the same job is the earlier
    job (not accepted again); with another job, the whole batch is refused
    (409). With `wait`, answers once every job is final (200) or when the
    wait runs out (202, the jobs as they stand).

    Args:
        wait (float | Unset):
        body (BatchRequest): Jobs to accept together.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BatchResponse | ErrorBody
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
            wait=wait,
        )
    ).parsed
