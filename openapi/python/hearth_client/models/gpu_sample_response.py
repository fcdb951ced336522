from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="GpuSampleResponse")


@_attrs_define
class GpuSampleResponse:
    """The GPUs a pool held at one moment, by what held them.

    Attributes:
        active (float):
        at (datetime.datetime):
        draining (float):
        standby (float):
        warm (float):
    """

    active: float
    at: datetime.datetime
    draining: float
    standby: float
    warm: float
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        active = self.active

        at = self.at.isoformat()

        draining = self.draining

        standby = self.standby

        warm = self.warm

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "active": active,
                "at": at,
                "draining": draining,
                "standby": standby,
                "warm": warm,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        active = d.pop("active")

        at = datetime.datetime.fromisoformat(d.pop("at"))

        draining = d.pop("draining")

        standby = d.pop("standby")

        warm = d.pop("warm")

        gpu_sample_response = cls(
            active=active,
            at=at,
            draining=draining,
            standby=standby,
            warm=warm,
        )

        gpu_sample_response.additional_properties = d
        return gpu_sample_response

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
