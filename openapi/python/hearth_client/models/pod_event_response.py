from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.pod_event_response_reason import PodEventResponseReason


T = TypeVar("T", bound="PodEventResponse")


@_attrs_define
class PodEventResponse:
    """
    Attributes:
        at (datetime.datetime):
        event_id (int):
        kind (str): `start`, `ready`, `promote`, `assign`, `reset`, `release` or `gone`.
        profile (str):
        reason (PodEventResponseReason): Why: `code` (e.g. `warm_affinity`, `standby_handover`, `cold_start`,
            `pod_started`, `standby_refill`, `keep_alive_expired`, `over_budget`),
            its figures, and `message` for people. Callers of other tenants are
            `null`.
        job_id (None | Unset | UUID):
    """

    at: datetime.datetime
    event_id: int
    kind: str
    profile: str
    reason: PodEventResponseReason
    job_id: None | Unset | UUID = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        at = self.at.isoformat()

        event_id = self.event_id

        kind = self.kind

        profile = self.profile

        reason = self.reason.to_dict()

        job_id: None | str | Unset
        if isinstance(self.job_id, Unset):
            job_id = UNSET
        elif isinstance(self.job_id, UUID):
            job_id = str(self.job_id)
        else:
            job_id = self.job_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "at": at,
                "event_id": event_id,
                "kind": kind,
                "profile": profile,
                "reason": reason,
            }
        )
        if job_id is not UNSET:
            field_dict["job_id"] = job_id

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.pod_event_response_reason import PodEventResponseReason  # noqa: PLC0415

        d = dict(src_dict)
        at = datetime.datetime.fromisoformat(d.pop("at"))

        event_id = d.pop("event_id")

        kind = d.pop("kind")

        profile = d.pop("profile")

        reason = PodEventResponseReason.from_dict(d.pop("reason"))

        def _parse_job_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                job_id_type_0 = UUID(data)

                return job_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        job_id = _parse_job_id(d.pop("job_id", UNSET))

        pod_event_response = cls(
            at=at,
            event_id=event_id,
            kind=kind,
            profile=profile,
            reason=reason,
            job_id=job_id,
        )

        pod_event_response.additional_properties = d
        return pod_event_response

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
