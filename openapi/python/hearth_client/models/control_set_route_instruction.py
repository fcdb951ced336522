from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

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
            when (ControlCondition | Unset): `cmp(a, b)`, unsigned
    """

    op: ControlSetRouteInstructionOp
    route: str
    when: ControlCondition | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        op = self.op.value

        route = self.route

        when: dict[str, Any] | Unset = UNSET
        if not isinstance(self.when, Unset):
            when = self.when.to_dict()

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

        _when = d.pop("when", UNSET)
        when: ControlCondition | Unset
        if isinstance(_when, Unset):
            when = UNSET
        else:
            when = ControlCondition.from_dict(_when)

        control_set_route_instruction = cls(
            op=op,
            route=route,
            when=when,
        )

        return control_set_route_instruction
