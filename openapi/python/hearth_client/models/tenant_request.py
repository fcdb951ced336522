from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="TenantRequest")


@_attrs_define
class TenantRequest:
    """
    Attributes:
        name (str): 1..=64 characters of `[A-Za-z0-9._:@/-]`, starting alphanumeric; unique.
    """

    name: str

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "name": name,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        name = d.pop("name")

        tenant_request = cls(
            name=name,
        )

        return tenant_request
