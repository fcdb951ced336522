from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define

from ..models.control_cmp import ControlCmp
from ..models.control_select_instruction_op import ControlSelectInstructionOp

if TYPE_CHECKING:
    from ..models.control_imm_operand import ControlImmOperand
    from ..models.control_input_operand import ControlInputOperand
    from ..models.control_reg_operand import ControlRegOperand


T = TypeVar("T", bound="ControlSelectInstruction")


@_attrs_define
class ControlSelectInstruction:
    """`dst = cmp(a, b) ? then : else` (unsigned comparison)

    Attributes:
        a (ControlImmOperand | ControlInputOperand | ControlRegOperand): An operand: a register, an input word or a u32
            constant
        b (ControlImmOperand | ControlInputOperand | ControlRegOperand): An operand: a register, an input word or a u32
            constant
        cmp (ControlCmp): Unsigned comparison: eq `==`, ne `!=`, lt `<`, le `<=`, gt `>`, ge `>=`
        dst (int): Destination: a register index, below the policy's `registers` (at most 15)
        else_ (ControlImmOperand | ControlInputOperand | ControlRegOperand): An operand: a register, an input word or a
            u32 constant
        op (ControlSelectInstructionOp):
        then (ControlImmOperand | ControlInputOperand | ControlRegOperand): An operand: a register, an input word or a
            u32 constant
    """

    a: ControlImmOperand | ControlInputOperand | ControlRegOperand
    b: ControlImmOperand | ControlInputOperand | ControlRegOperand
    cmp: ControlCmp
    dst: int
    else_: ControlImmOperand | ControlInputOperand | ControlRegOperand
    op: ControlSelectInstructionOp
    then: ControlImmOperand | ControlInputOperand | ControlRegOperand

    def to_dict(self) -> dict[str, Any]:
        from ..models.control_input_operand import ControlInputOperand  # noqa: PLC0415
        from ..models.control_reg_operand import ControlRegOperand  # noqa: PLC0415

        a: dict[str, Any]
        if isinstance(self.a, ControlRegOperand):
            a = self.a.to_dict()
        elif isinstance(self.a, ControlInputOperand):
            a = self.a.to_dict()
        else:
            a = self.a.to_dict()

        b: dict[str, Any]
        if isinstance(self.b, ControlRegOperand):
            b = self.b.to_dict()
        elif isinstance(self.b, ControlInputOperand):
            b = self.b.to_dict()
        else:
            b = self.b.to_dict()

        cmp = self.cmp.value

        dst = self.dst

        else_: dict[str, Any]
        if isinstance(self.else_, ControlRegOperand):
            else_ = self.else_.to_dict()
        elif isinstance(self.else_, ControlInputOperand):
            else_ = self.else_.to_dict()
        else:
            else_ = self.else_.to_dict()

        op = self.op.value

        then: dict[str, Any]
        if isinstance(self.then, ControlRegOperand):
            then = self.then.to_dict()
        elif isinstance(self.then, ControlInputOperand):
            then = self.then.to_dict()
        else:
            then = self.then.to_dict()

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "a": a,
                "b": b,
                "cmp": cmp,
                "dst": dst,
                "else": else_,
                "op": op,
                "then": then,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.control_imm_operand import ControlImmOperand  # noqa: PLC0415
        from ..models.control_input_operand import ControlInputOperand  # noqa: PLC0415
        from ..models.control_reg_operand import ControlRegOperand  # noqa: PLC0415

        d = dict(src_dict)

        def _parse_a(data: object) -> ControlImmOperand | ControlInputOperand | ControlRegOperand:
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_control_operand_type_0 = ControlRegOperand.from_dict(data)

                return componentsschemas_control_operand_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_control_operand_type_1 = ControlInputOperand.from_dict(data)

                return componentsschemas_control_operand_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            if not isinstance(data, dict):
                raise TypeError()
            componentsschemas_control_operand_type_2 = ControlImmOperand.from_dict(data)

            return componentsschemas_control_operand_type_2

        a = _parse_a(d.pop("a"))

        def _parse_b(data: object) -> ControlImmOperand | ControlInputOperand | ControlRegOperand:
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_control_operand_type_0 = ControlRegOperand.from_dict(data)

                return componentsschemas_control_operand_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_control_operand_type_1 = ControlInputOperand.from_dict(data)

                return componentsschemas_control_operand_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            if not isinstance(data, dict):
                raise TypeError()
            componentsschemas_control_operand_type_2 = ControlImmOperand.from_dict(data)

            return componentsschemas_control_operand_type_2

        b = _parse_b(d.pop("b"))

        cmp = ControlCmp(d.pop("cmp"))

        dst = d.pop("dst")

        def _parse_else_(data: object) -> ControlImmOperand | ControlInputOperand | ControlRegOperand:
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_control_operand_type_0 = ControlRegOperand.from_dict(data)

                return componentsschemas_control_operand_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_control_operand_type_1 = ControlInputOperand.from_dict(data)

                return componentsschemas_control_operand_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            if not isinstance(data, dict):
                raise TypeError()
            componentsschemas_control_operand_type_2 = ControlImmOperand.from_dict(data)

            return componentsschemas_control_operand_type_2

        else_ = _parse_else_(d.pop("else"))

        op = ControlSelectInstructionOp(d.pop("op"))

        def _parse_then(data: object) -> ControlImmOperand | ControlInputOperand | ControlRegOperand:
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_control_operand_type_0 = ControlRegOperand.from_dict(data)

                return componentsschemas_control_operand_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_control_operand_type_1 = ControlInputOperand.from_dict(data)

                return componentsschemas_control_operand_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            if not isinstance(data, dict):
                raise TypeError()
            componentsschemas_control_operand_type_2 = ControlImmOperand.from_dict(data)

            return componentsschemas_control_operand_type_2

        then = _parse_then(d.pop("then"))

        control_select_instruction = cls(
            a=a,
            b=b,
            cmp=cmp,
            dst=dst,
            else_=else_,
            op=op,
            then=then,
        )

        return control_select_instruction
