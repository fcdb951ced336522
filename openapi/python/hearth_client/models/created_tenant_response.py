from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="CreatedTenantResponse")


@_attrs_define
class CreatedTenantResponse:
    """A new tenant with its first API key, shown only this once.

    Attributes:
        api_key (str):
        api_key_id (UUID):
        name (str):
        tenant_id (UUID):
    """

    api_key: str
    api_key_id: UUID
    name: str
    tenant_id: UUID
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        api_key = self.api_key

        api_key_id = str(self.api_key_id)

        name = self.name

        tenant_id = str(self.tenant_id)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "api_key": api_key,
                "api_key_id": api_key_id,
                "name": name,
                "tenant_id": tenant_id,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        api_key = d.pop("api_key")

        api_key_id = UUID(d.pop("api_key_id"))

        name = d.pop("name")

        tenant_id = UUID(d.pop("tenant_id"))

        created_tenant_response = cls(
            api_key=api_key,
            api_key_id=api_key_id,
            name=name,
            tenant_id=tenant_id,
        )

        created_tenant_response.additional_properties = d
        return created_tenant_response

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
