from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="BudgetInputsResponse")


@_attrs_define
class BudgetInputsResponse:
    """What the pool's budget was computed from.

    Attributes:
        arrival_rate_per_s (float): Recent arrival rate in pods per second (exponentially weighted).
        demand_gpus (float): Unclamped demand in GPUs: standby target, queued pods and the pods
            expected within the horizon.
        floor_gpus (float):
        queued_pods (int): Pods of jobs accepted but not started.
        standby_target (int):
        ceiling_gpus (float | None | Unset): `null` when unbounded.
    """

    arrival_rate_per_s: float
    demand_gpus: float
    floor_gpus: float
    queued_pods: int
    standby_target: int
    ceiling_gpus: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        arrival_rate_per_s = self.arrival_rate_per_s

        demand_gpus = self.demand_gpus

        floor_gpus = self.floor_gpus

        queued_pods = self.queued_pods

        standby_target = self.standby_target

        ceiling_gpus: float | None | Unset
        if isinstance(self.ceiling_gpus, Unset):
            ceiling_gpus = UNSET
        else:
            ceiling_gpus = self.ceiling_gpus

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "arrival_rate_per_s": arrival_rate_per_s,
                "demand_gpus": demand_gpus,
                "floor_gpus": floor_gpus,
                "queued_pods": queued_pods,
                "standby_target": standby_target,
            }
        )
        if ceiling_gpus is not UNSET:
            field_dict["ceiling_gpus"] = ceiling_gpus

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        arrival_rate_per_s = d.pop("arrival_rate_per_s")

        demand_gpus = d.pop("demand_gpus")

        floor_gpus = d.pop("floor_gpus")

        queued_pods = d.pop("queued_pods")

        standby_target = d.pop("standby_target")

        def _parse_ceiling_gpus(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        ceiling_gpus = _parse_ceiling_gpus(d.pop("ceiling_gpus", UNSET))

        budget_inputs_response = cls(
            arrival_rate_per_s=arrival_rate_per_s,
            demand_gpus=demand_gpus,
            floor_gpus=floor_gpus,
            queued_pods=queued_pods,
            standby_target=standby_target,
            ceiling_gpus=ceiling_gpus,
        )

        budget_inputs_response.additional_properties = d
        return budget_inputs_response

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
