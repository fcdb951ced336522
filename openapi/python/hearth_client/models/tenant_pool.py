from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="TenantPool")


@_attrs_define
class TenantPool:
    """The requesting tenant's share of the pool.

    Attributes:
        floor_gpus (float):
        queued_pods (int):
        warm_gpus (float): GPUs its warm pods hold.
        budget_gpus (float | None | Unset): Its budget for warm pods now; `null` for policies without a budget.
        ceiling_gpus (float | None | Unset): `null` when unbounded.
    """

    floor_gpus: float
    queued_pods: int
    warm_gpus: float
    budget_gpus: float | None | Unset = UNSET
    ceiling_gpus: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        floor_gpus = self.floor_gpus

        queued_pods = self.queued_pods

        warm_gpus = self.warm_gpus

        budget_gpus: float | None | Unset
        if isinstance(self.budget_gpus, Unset):
            budget_gpus = UNSET
        else:
            budget_gpus = self.budget_gpus

        ceiling_gpus: float | None | Unset
        if isinstance(self.ceiling_gpus, Unset):
            ceiling_gpus = UNSET
        else:
            ceiling_gpus = self.ceiling_gpus

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "floor_gpus": floor_gpus,
                "queued_pods": queued_pods,
                "warm_gpus": warm_gpus,
            }
        )
        if budget_gpus is not UNSET:
            field_dict["budget_gpus"] = budget_gpus
        if ceiling_gpus is not UNSET:
            field_dict["ceiling_gpus"] = ceiling_gpus

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        floor_gpus = d.pop("floor_gpus")

        queued_pods = d.pop("queued_pods")

        warm_gpus = d.pop("warm_gpus")

        def _parse_budget_gpus(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        budget_gpus = _parse_budget_gpus(d.pop("budget_gpus", UNSET))

        def _parse_ceiling_gpus(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        ceiling_gpus = _parse_ceiling_gpus(d.pop("ceiling_gpus", UNSET))

        tenant_pool = cls(
            floor_gpus=floor_gpus,
            queued_pods=queued_pods,
            warm_gpus=warm_gpus,
            budget_gpus=budget_gpus,
            ceiling_gpus=ceiling_gpus,
        )

        tenant_pool.additional_properties = d
        return tenant_pool

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
