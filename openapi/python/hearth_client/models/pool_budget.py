from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.budget_inputs_response import BudgetInputsResponse


T = TypeVar("T", bound="PoolBudget")


@_attrs_define
class PoolBudget:
    """The budget on GPUs held by warm plus standby pods.

    Attributes:
        budget_gpus (float):
        inputs (BudgetInputsResponse): What the pool's budget was computed from.
    """

    budget_gpus: float
    inputs: BudgetInputsResponse
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        budget_gpus = self.budget_gpus

        inputs = self.inputs.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "budget_gpus": budget_gpus,
                "inputs": inputs,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.budget_inputs_response import BudgetInputsResponse  # noqa: PLC0415

        d = dict(src_dict)
        budget_gpus = d.pop("budget_gpus")

        inputs = BudgetInputsResponse.from_dict(d.pop("inputs"))

        pool_budget = cls(
            budget_gpus=budget_gpus,
            inputs=inputs,
        )

        pool_budget.additional_properties = d
        return pool_budget

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
