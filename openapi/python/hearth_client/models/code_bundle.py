from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="CodeBundle")


@_attrs_define
class CodeBundle:
    """The job's code as a bundle uploaded earlier

    Attributes:
        bundle (str): `sha256:<hex>` of a bundle uploaded with `POST /v1/bundles`
    """

    bundle: str

    def to_dict(self) -> dict[str, Any]:
        bundle = self.bundle

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "bundle": bundle,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        bundle = d.pop("bundle")

        code_bundle = cls(
            bundle=bundle,
        )

        return code_bundle
