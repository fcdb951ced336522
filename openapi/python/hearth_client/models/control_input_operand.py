from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="ControlInputOperand")


@_attrs_define
class ControlInputOperand:
    """Input word `input` of the event (missing words read 0)

    Attributes:
        input_ (int): An input index, below the policy's `inputs`
    """

    input_: int

    def to_dict(self) -> dict[str, Any]:
        input_ = self.input_

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "input": input_,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        input_ = d.pop("input")

        control_input_operand = cls(
            input_=input_,
        )

        return control_input_operand
