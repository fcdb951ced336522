from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="ControlImmOperand")


@_attrs_define
class ControlImmOperand:
    """A constant

    Attributes:
        imm (int):
    """

    imm: int

    def to_dict(self) -> dict[str, Any]:
        imm = self.imm

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "imm": imm,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        imm = d.pop("imm")

        control_imm_operand = cls(
            imm=imm,
        )

        return control_imm_operand
