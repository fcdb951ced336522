from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define

from ..models.control_cmp import ControlCmp

if TYPE_CHECKING:
    from ..models.control_imm_operand import ControlImmOperand
    from ..models.control_input_operand import ControlInputOperand
    from ..models.control_reg_operand import ControlRegOperand


T = TypeVar("T", bound="ControlCondition")


@_attrs_define
class ControlCondition:
    """`cmp(a, b)`, unsigned

    Attributes:
        a (ControlImmOperand | ControlInputOperand | ControlRegOperand): An operand: a register, an input word or a u32
            constant
        b (ControlImmOperand | ControlInputOperand | ControlRegOperand): An operand: a register, an input word or a u32
            constant
        cmp (ControlCmp): Unsigned comparison: eq `==`, ne `!=`, lt `<`, le `<=`, gt `>`, ge `>=`
    """

    a: ControlImmOperand | ControlInputOperand | ControlRegOperand
    b: ControlImmOperand | ControlInputOperand | ControlRegOperand
    cmp: ControlCmp

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

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "a": a,
                "b": b,
                "cmp": cmp,
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

        control_condition = cls(
            a=a,
            b=b,
            cmp=cmp,
        )

        return control_condition
