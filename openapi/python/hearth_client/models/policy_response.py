from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.control_policy import ControlPolicy
    from ..models.policy_route_response import PolicyRouteResponse


T = TypeVar("T", bound="PolicyResponse")


@_attrs_define
class PolicyResponse:
    """A registered control policy.

    Attributes:
        created_at (datetime.datetime):
        durability (str): `commit`: an event is answered once the state it produced is
            committed (a crash loses no answered event); `snapshot`: answered at
            once, state written every `snapshot_s` seconds (a crash loses the
            answered events of up to one interval). Example: commit.
        inputs (int):
        max_steps (int): H: most observation-free steps one event runs on the executor.
        name (str):
        policy_id (UUID):
        registers (int):
        routes (list[PolicyRouteResponse]):
        spec (ControlPolicy): A control policy: a deterministic transition over a session of u32 registers, run per
            event as a chain of at most `max_steps` steps of straight-line route bodies. Semantics of each op: README,
            "Control policy language".
        version (int):
    """

    created_at: datetime.datetime
    durability: str
    inputs: int
    max_steps: int
    name: str
    policy_id: UUID
    registers: int
    routes: list[PolicyRouteResponse]
    spec: ControlPolicy
    version: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at = self.created_at.isoformat()

        durability = self.durability

        inputs = self.inputs

        max_steps = self.max_steps

        name = self.name

        policy_id = str(self.policy_id)

        registers = self.registers

        routes = []
        for routes_item_data in self.routes:
            routes_item = routes_item_data.to_dict()
            routes.append(routes_item)

        spec = self.spec.to_dict()

        version = self.version

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "created_at": created_at,
                "durability": durability,
                "inputs": inputs,
                "max_steps": max_steps,
                "name": name,
                "policy_id": policy_id,
                "registers": registers,
                "routes": routes,
                "spec": spec,
                "version": version,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.control_policy import ControlPolicy  # noqa: PLC0415
        from ..models.policy_route_response import PolicyRouteResponse  # noqa: PLC0415

        d = dict(src_dict)
        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        durability = d.pop("durability")

        inputs = d.pop("inputs")

        max_steps = d.pop("max_steps")

        name = d.pop("name")

        policy_id = UUID(d.pop("policy_id"))

        registers = d.pop("registers")

        routes = []
        _routes = d.pop("routes")
        for routes_item_data in _routes:
            routes_item = PolicyRouteResponse.from_dict(routes_item_data)

            routes.append(routes_item)

        spec = ControlPolicy.from_dict(d.pop("spec"))

        version = d.pop("version")

        policy_response = cls(
            created_at=created_at,
            durability=durability,
            inputs=inputs,
            max_steps=max_steps,
            name=name,
            policy_id=policy_id,
            registers=registers,
            routes=routes,
            spec=spec,
            version=version,
        )

        policy_response.additional_properties = d
        return policy_response

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
