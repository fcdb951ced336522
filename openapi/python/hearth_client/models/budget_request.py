from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="BudgetRequest")


@_attrs_define
class BudgetRequest:
    """Bounds of the GPUs a tenant's warm pods of one profile may hold.

    Attributes:
        ceiling_gpus (float): The tenant's warm pods never hold more (a multiple of 1/8 GPU).
        floor_gpus (float): The tenant keeps at least this much warm when the pool is over its
            budget (a multiple of 1/8 GPU, at most `ceiling_gpus`).
    """

    ceiling_gpus: float
    floor_gpus: float

    def to_dict(self) -> dict[str, Any]:
        ceiling_gpus = self.ceiling_gpus

        floor_gpus = self.floor_gpus

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "ceiling_gpus": ceiling_gpus,
                "floor_gpus": floor_gpus,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        ceiling_gpus = d.pop("ceiling_gpus")

        floor_gpus = d.pop("floor_gpus")

        budget_request = cls(
            ceiling_gpus=ceiling_gpus,
            floor_gpus=floor_gpus,
        )

        return budget_request
