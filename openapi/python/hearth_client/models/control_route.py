from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define

if TYPE_CHECKING:
    from ..models.control_arithmetic_instruction import ControlArithmeticInstruction
    from ..models.control_emit_instruction import ControlEmitInstruction
    from ..models.control_select_instruction import ControlSelectInstruction
    from ..models.control_set_route_instruction import ControlSetRouteInstruction


T = TypeVar("T", bound="ControlRoute")


@_attrs_define
class ControlRoute:
    """One route: a name and a straight-line body, run once per step

    Attributes:
        body (list[ControlArithmeticInstruction | ControlEmitInstruction | ControlSelectInstruction |
            ControlSetRouteInstruction]): Instructions, in order; each sees the effects of the ones before it
        name (str): Route name, unique in the policy
    """

    body: list[
        ControlArithmeticInstruction | ControlEmitInstruction | ControlSelectInstruction | ControlSetRouteInstruction
    ]
    name: str

    def to_dict(self) -> dict[str, Any]:
        from ..models.control_arithmetic_instruction import ControlArithmeticInstruction  # noqa: PLC0415
        from ..models.control_select_instruction import ControlSelectInstruction  # noqa: PLC0415
        from ..models.control_set_route_instruction import ControlSetRouteInstruction  # noqa: PLC0415

        body = []
        for body_item_data in self.body:
            body_item: dict[str, Any]
            if isinstance(body_item_data, ControlArithmeticInstruction):
                body_item = body_item_data.to_dict()
            elif isinstance(body_item_data, ControlSelectInstruction):
                body_item = body_item_data.to_dict()
            elif isinstance(body_item_data, ControlSetRouteInstruction):
                body_item = body_item_data.to_dict()
            else:
                body_item = body_item_data.to_dict()

            body.append(body_item)

        name = self.name

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "body": body,
                "name": name,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.control_arithmetic_instruction import ControlArithmeticInstruction  # noqa: PLC0415
        from ..models.control_emit_instruction import ControlEmitInstruction  # noqa: PLC0415
        from ..models.control_select_instruction import ControlSelectInstruction  # noqa: PLC0415
        from ..models.control_set_route_instruction import ControlSetRouteInstruction  # noqa: PLC0415

        d = dict(src_dict)
        body = []
        _body = d.pop("body")
        for body_item_data in _body:

            def _parse_body_item(
                data: object,
            ) -> (
                ControlArithmeticInstruction
                | ControlEmitInstruction
                | ControlSelectInstruction
                | ControlSetRouteInstruction
            ):
                try:
                    if not isinstance(data, dict):
                        raise TypeError()
                    componentsschemas_control_instruction_type_0 = ControlArithmeticInstruction.from_dict(data)

                    return componentsschemas_control_instruction_type_0
                except (TypeError, ValueError, AttributeError, KeyError):
                    pass
                try:
                    if not isinstance(data, dict):
                        raise TypeError()
                    componentsschemas_control_instruction_type_1 = ControlSelectInstruction.from_dict(data)

                    return componentsschemas_control_instruction_type_1
                except (TypeError, ValueError, AttributeError, KeyError):
                    pass
                try:
                    if not isinstance(data, dict):
                        raise TypeError()
                    componentsschemas_control_instruction_type_2 = ControlSetRouteInstruction.from_dict(data)

                    return componentsschemas_control_instruction_type_2
                except (TypeError, ValueError, AttributeError, KeyError):
                    pass
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_control_instruction_type_3 = ControlEmitInstruction.from_dict(data)

                return componentsschemas_control_instruction_type_3

            body_item = _parse_body_item(body_item_data)

            body.append(body_item)

        name = d.pop("name")

        control_route = cls(
            body=body,
            name=name,
        )

        return control_route
