from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.control_emit_instruction_op import ControlEmitInstructionOp
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.control_condition import ControlCondition


T = TypeVar("T", bound="ControlEmitInstruction")


@_attrs_define
class ControlEmitInstruction:
    """If `when` holds (always when absent), the step's effect becomes `{code, values}` with the listed registers' values
    at this point; a later `emit` that fires replaces it. An effect ends the event's chain after this step

        Attributes:
            code (int): Effect code
            op (ControlEmitInstructionOp):
            regs (list[int] | Unset): Registers whose values the effect reports
            when (ControlCondition | Unset): `cmp(a, b)`, unsigned
    """

    code: int
    op: ControlEmitInstructionOp
    regs: list[int] | Unset = UNSET
    when: ControlCondition | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        code = self.code

        op = self.op.value

        regs: list[int] | Unset = UNSET
        if not isinstance(self.regs, Unset):
            regs = self.regs

        when: dict[str, Any] | Unset = UNSET
        if not isinstance(self.when, Unset):
            when = self.when.to_dict()

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "code": code,
                "op": op,
            }
        )
        if regs is not UNSET:
            field_dict["regs"] = regs
        if when is not UNSET:
            field_dict["when"] = when

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.control_condition import ControlCondition  # noqa: PLC0415

        d = dict(src_dict)
        code = d.pop("code")

        op = ControlEmitInstructionOp(d.pop("op"))

        regs = cast(list[int], d.pop("regs", UNSET))

        _when = d.pop("when", UNSET)
        when: ControlCondition | Unset
        if isinstance(_when, Unset):
            when = UNSET
        else:
            when = ControlCondition.from_dict(_when)

        control_emit_instruction = cls(
            code=code,
            op=op,
            regs=regs,
            when=when,
        )

        return control_emit_instruction
