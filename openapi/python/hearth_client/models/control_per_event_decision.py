from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define

if TYPE_CHECKING:
    from ..models.control_condition import ControlCondition


T = TypeVar("T", bound="ControlPerEventDecision")


@_attrs_define
class ControlPerEventDecision:
    """Each event continues iff the condition holds on its own registers

    Attributes:
        per_event (ControlCondition): `cmp(a, b)`, unsigned
    """

    per_event: ControlCondition

    def to_dict(self) -> dict[str, Any]:
        per_event = self.per_event.to_dict()

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "per_event": per_event,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.control_condition import ControlCondition  # noqa: PLC0415

        d = dict(src_dict)
        per_event = ControlCondition.from_dict(d.pop("per_event"))

        control_per_event_decision = cls(
            per_event=per_event,
        )

        return control_per_event_decision
