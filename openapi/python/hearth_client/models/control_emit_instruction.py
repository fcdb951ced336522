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
            when (ControlCondition | None | Unset):
    """

    code: int
    op: ControlEmitInstructionOp
    regs: list[int] | Unset = UNSET
    when: ControlCondition | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.control_condition import ControlCondition  # noqa: PLC0415

        code = self.code

        op = self.op.value

        regs: list[int] | Unset = UNSET
        if not isinstance(self.regs, Unset):
            regs = self.regs

        when: dict[str, Any] | None | Unset
        if isinstance(self.when, Unset):
            when = UNSET
        elif isinstance(self.when, ControlCondition):
            when = self.when.to_dict()
        else:
            when = self.when

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

        def _parse_when(data: object) -> ControlCondition | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                when_type_0 = ControlCondition.from_dict(data)

                return when_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ControlCondition | None | Unset, data)

        when = _parse_when(d.pop("when", UNSET))

        control_emit_instruction = cls(
            code=code,
            op=op,
            regs=regs,
            when=when,
        )

        return control_emit_instruction
