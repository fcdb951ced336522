from http import HTTPStatus
from typing import Any

import httpx

from ...client import AuthenticatedClient, Client
from ...models.create_job import CreateJob
from ...models.error_body import ErrorBody
from ...models.job_response import JobResponse
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    body: CreateJob,
    wait: float | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key

    params: dict[str, Any] = {}

    params["wait"] = wait

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/jobs",
        "params": params,
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
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
) -> Response[ErrorBody | JobResponse]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: CreateJob,
    wait: float | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> Response[ErrorBody | JobResponse]:
    """Submits a job.

     Submits a job. With `wait`, answers 200 with the finished job if it ends in
    time, else 202 with the job as it stands. An `Idempotency-Key` header makes
    retries safe: the same key and job give the same job (a default left out
    or spelled out is the same job); the same key with another job is 409.

    Args:
        wait (float | Unset):
        idempotency_key (str | Unset):
        body (CreateJob): A job submission as it arrives on the wire (`POST /v1/jobs`). Only
            `kind`,
            `profile`, `caller` and `command` are required; only a rollout has a
            `topology`. The bounds are the service's default limits.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | JobResponse]
    """

    kwargs = _get_kwargs(
        body=body,
        wait=wait,
        idempotency_key=idempotency_key,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    body: CreateJob,
    wait: float | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> ErrorBody | JobResponse | None:
    """Submits a job.

     Submits a job. With `wait`, answers 200 with the finished job if it ends in
    time, else 202 with the job as it stands. An `Idempotency-Key` header makes
    retries safe: the same key and job give the same job (a default left out
    or spelled out is the same job); the same key with another job is 409.

    Args:
        wait (float | Unset):
        idempotency_key (str | Unset):
        body (CreateJob): A job submission as it arrives on the wire (`POST /v1/jobs`). Only
            `kind`,
            `profile`, `caller` and `command` are required; only a rollout has a
            `topology`. The bounds are the service's default limits.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | JobResponse
    """

    return sync_detailed(
        client=client,
        body=body,
        wait=wait,
        idempotency_key=idempotency_key,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: CreateJob,
    wait: float | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> Response[ErrorBody | JobResponse]:
    """Submits a job.

     Submits a job. With `wait`, answers 200 with the finished job if it ends in
    time, else 202 with the job as it stands. An `Idempotency-Key` header makes
    retries safe: the same key and job give the same job (a default left out
    or spelled out is the same job); the same key with another job is 409.

    Args:
        wait (float | Unset):
        idempotency_key (str | Unset):
        body (CreateJob): A job submission as it arrives on the wire (`POST /v1/jobs`). Only
            `kind`,
            `profile`, `caller` and `command` are required; only a rollout has a
            `topology`. The bounds are the service's default limits.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | JobResponse]
    """

    kwargs = _get_kwargs(
        body=body,
        wait=wait,
        idempotency_key=idempotency_key,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: CreateJob,
    wait: float | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> ErrorBody | JobResponse | None:
    """Submits a job.

     Submits a job. With `wait`, answers 200 with the finished job if it ends in
    time, else 202 with the job as it stands. An `Idempotency-Key` header makes
    retries safe: the same key and job give the same job (a default left out
    or spelled out is the same job); the same key with another job is 409.

    Args:
        wait (float | Unset):
        idempotency_key (str | Unset):
        body (CreateJob): A job submission as it arrives on the wire (`POST /v1/jobs`). Only
            `kind`,
            `profile`, `caller` and `command` are required; only a rollout has a
            `topology`. The bounds are the service's default limits.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | JobResponse
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
            wait=wait,
            idempotency_key=idempotency_key,
        )
    ).parsed
