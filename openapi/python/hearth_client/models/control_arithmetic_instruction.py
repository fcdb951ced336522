from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define

from ..models.control_arithmetic_instruction_op import ControlArithmeticInstructionOp

if TYPE_CHECKING:
    from ..models.control_imm_operand import ControlImmOperand
    from ..models.control_input_operand import ControlInputOperand
    from ..models.control_reg_operand import ControlRegOperand


T = TypeVar("T", bound="ControlArithmeticInstruction")


@_attrs_define
class ControlArithmeticInstruction:
    """`dst = op(a, b)`: add, sub, mul wrap mod 2^32; add_sat, sub_sat, mul_sat saturate at 0 and 4294967295; xor, and, or
    are bitwise; rotl, rotr rotate `a` by `b mod 32`; mix is murmur3's fmix32 of `a ^ (b * 0x9E3779B9 mod 2^32)`

        Attributes:
            a (ControlImmOperand | ControlInputOperand | ControlRegOperand): An operand: a register, an input word or a u32
                constant
            b (ControlImmOperand | ControlInputOperand | ControlRegOperand): An operand: a register, an input word or a u32
                constant
            dst (int): Destination: a register index, below the policy's `registers` (at most 15)
            op (ControlArithmeticInstructionOp):
    """

    a: ControlImmOperand | ControlInputOperand | ControlRegOperand
    b: ControlImmOperand | ControlInputOperand | ControlRegOperand
    dst: int
    op: ControlArithmeticInstructionOp

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

        dst = self.dst

        op = self.op.value

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "a": a,
                "b": b,
                "dst": dst,
                "op": op,
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

        dst = d.pop("dst")

        op = ControlArithmeticInstructionOp(d.pop("op"))

        control_arithmetic_instruction = cls(
            a=a,
            b=b,
            dst=dst,
            op=op,
        )

        return control_arithmetic_instruction
