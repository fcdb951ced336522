from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="Deps")


@_attrs_define
class Deps:
    """Extra packages bound at start and cached in the pod per dependency set.

    Attributes:
        pip (list[str] | Unset): Requirements like `name`, `name==1.0` or `name[extra]>=2` (at most 64)
    """

    pip: list[str] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        pip: list[str] | Unset = UNSET
        if not isinstance(self.pip, Unset):
            pip = self.pip

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if pip is not UNSET:
            field_dict["pip"] = pip

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        pip = cast(list[str], d.pop("pip", UNSET))

        deps = cls(
            pip=pip,
        )

        deps.additional_properties = d
        return deps

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
