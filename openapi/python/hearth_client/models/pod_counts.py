from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="PodCounts")


@_attrs_define
class PodCounts:
    """Pods of one profile by state, for the profiles API.

    Attributes:
        active (int):
        standby (int): Started and unbound, ready for any caller's job.
        starting (int):
        stopping (int):
        warm (int):
    """

    active: int
    standby: int
    starting: int
    stopping: int
    warm: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        active = self.active

        standby = self.standby

        starting = self.starting

        stopping = self.stopping

        warm = self.warm

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "active": active,
                "standby": standby,
                "starting": starting,
                "stopping": stopping,
                "warm": warm,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        active = d.pop("active")

        standby = d.pop("standby")

        starting = d.pop("starting")

        stopping = d.pop("stopping")

        warm = d.pop("warm")

        pod_counts = cls(
            active=active,
            standby=standby,
            starting=starting,
            stopping=stopping,
            warm=warm,
        )

        pod_counts.additional_properties = d
        return pod_counts

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
