from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="ControlRegOperand")


@_attrs_define
class ControlRegOperand:
    """Register `reg` of the session

    Attributes:
        reg (int): Register: a register index, below the policy's `registers` (at most 15)
    """

    reg: int

    def to_dict(self) -> dict[str, Any]:
        reg = self.reg

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "reg": reg,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        reg = d.pop("reg")

        control_reg_operand = cls(
            reg=reg,
        )

        return control_reg_operand
