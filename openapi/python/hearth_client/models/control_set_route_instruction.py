from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.control_set_route_instruction_op import ControlSetRouteInstructionOp
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.control_condition import ControlCondition


T = TypeVar("T", bound="ControlSetRouteInstruction")


@_attrs_define
class ControlSetRouteInstruction:
    """If `when` holds (always when absent), the session's next route becomes `route`; when several fire in one step, the
    last to fire wins

        Attributes:
            op (ControlSetRouteInstructionOp):
            route (str): A route of this policy, by name
            when (ControlCondition | None | Unset):
    """

    op: ControlSetRouteInstructionOp
    route: str
    when: ControlCondition | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.control_condition import ControlCondition  # noqa: PLC0415

        op = self.op.value

        route = self.route

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
                "op": op,
                "route": route,
            }
        )
        if when is not UNSET:
            field_dict["when"] = when

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.control_condition import ControlCondition  # noqa: PLC0415

        d = dict(src_dict)
        op = ControlSetRouteInstructionOp(d.pop("op"))

        route = d.pop("route")

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

        control_set_route_instruction = cls(
            op=op,
            route=route,
            when=when,
        )

        return control_set_route_instruction
