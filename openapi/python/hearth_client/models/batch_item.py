from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.create_job import CreateJob


T = TypeVar("T", bound="BatchItem")


@_attrs_define
class BatchItem:
    """One job of a batch.

    Attributes:
        job (CreateJob): A job submission as it arrives on the wire (`POST /v1/jobs`). Only `kind`,
            `profile`, `caller` and `command` are required; only a rollout has a
            `topology`. The bounds are the service's default limits.
        idempotency_key (None | str | Unset): Makes this job's submission idempotent, as the `Idempotency-Key`
            header does for one job: 1..=255 visible ASCII characters. A batch
            sent again accepts none twice.
    """

    job: CreateJob
    idempotency_key: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        job = self.job.to_dict()

        idempotency_key: None | str | Unset
        if isinstance(self.idempotency_key, Unset):
            idempotency_key = UNSET
        else:
            idempotency_key = self.idempotency_key

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "job": job,
            }
        )
        if idempotency_key is not UNSET:
            field_dict["idempotency_key"] = idempotency_key

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.create_job import CreateJob  # noqa: PLC0415

        d = dict(src_dict)
        job = CreateJob.from_dict(d.pop("job"))

        def _parse_idempotency_key(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        idempotency_key = _parse_idempotency_key(d.pop("idempotency_key", UNSET))

        batch_item = cls(
            job=job,
            idempotency_key=idempotency_key,
        )

        return batch_item
