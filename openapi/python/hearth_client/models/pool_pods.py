from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="PoolPods")


@_attrs_define
class PoolPods:
    """Pods of the pool by state.

    Attributes:
        active (int):
        draining (int):
        reserved (int): Ready and held for a gang whose other pods are still starting.
        standby (int): Started and unbound, ready to be promoted for any caller's job.
        starting (int):
        warm (int): Idle, holding one caller's binding; serves only that caller.
    """

    active: int
    draining: int
    reserved: int
    standby: int
    starting: int
    warm: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        active = self.active

        draining = self.draining

        reserved = self.reserved

        standby = self.standby

        starting = self.starting

        warm = self.warm

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "active": active,
                "draining": draining,
                "reserved": reserved,
                "standby": standby,
                "starting": starting,
                "warm": warm,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        active = d.pop("active")

        draining = d.pop("draining")

        reserved = d.pop("reserved")

        standby = d.pop("standby")

        starting = d.pop("starting")

        warm = d.pop("warm")

        pool_pods = cls(
            active=active,
            draining=draining,
            reserved=reserved,
            standby=standby,
            starting=starting,
            warm=warm,
        )

        pool_pods.additional_properties = d
        return pool_pods

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
