from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="BudgetResponse")


@_attrs_define
class BudgetResponse:
    """
    Attributes:
        ceiling_gpus (float):
        floor_gpus (float):
        profile (str):
        tenant_id (UUID):
        updated_at (datetime.datetime):
    """

    ceiling_gpus: float
    floor_gpus: float
    profile: str
    tenant_id: UUID
    updated_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        ceiling_gpus = self.ceiling_gpus

        floor_gpus = self.floor_gpus

        profile = self.profile

        tenant_id = str(self.tenant_id)

        updated_at = self.updated_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "ceiling_gpus": ceiling_gpus,
                "floor_gpus": floor_gpus,
                "profile": profile,
                "tenant_id": tenant_id,
                "updated_at": updated_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        ceiling_gpus = d.pop("ceiling_gpus")

        floor_gpus = d.pop("floor_gpus")

        profile = d.pop("profile")

        tenant_id = UUID(d.pop("tenant_id"))

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        budget_response = cls(
            ceiling_gpus=ceiling_gpus,
            floor_gpus=floor_gpus,
            profile=profile,
            tenant_id=tenant_id,
            updated_at=updated_at,
        )

        budget_response.additional_properties = d
        return budget_response

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
