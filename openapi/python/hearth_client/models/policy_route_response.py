from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="PolicyRouteResponse")


@_attrs_define
class PolicyRouteResponse:
    """One executable route of a policy.

    Attributes:
        calibrated (bool): Whether `k` was measured by `hearth control calibrate` (else the default).
        name (str):
        route_id (str): Executable route id: SHA-256 (hex) of the body, state schema and version.
        k (int | None | Unset): Smallest batch (`K_r`); null: no batch wins on this machine, every
            event of the route runs on the CPU path.
    """

    calibrated: bool
    name: str
    route_id: str
    k: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        calibrated = self.calibrated

        name = self.name

        route_id = self.route_id

        k: int | None | Unset
        if isinstance(self.k, Unset):
            k = UNSET
        else:
            k = self.k

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "calibrated": calibrated,
                "name": name,
                "route_id": route_id,
            }
        )
        if k is not UNSET:
            field_dict["k"] = k

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        calibrated = d.pop("calibrated")

        name = d.pop("name")

        route_id = d.pop("route_id")

        def _parse_k(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        k = _parse_k(d.pop("k", UNSET))

        policy_route_response = cls(
            calibrated=calibrated,
            name=name,
            route_id=route_id,
            k=k,
        )

        policy_route_response.additional_properties = d
        return policy_route_response

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
