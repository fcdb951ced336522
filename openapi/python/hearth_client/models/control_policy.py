from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.control_policy_durability import ControlPolicyDurability
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.control_batch_decision import ControlBatchDecision
    from ..models.control_per_event_decision import ControlPerEventDecision
    from ..models.control_route import ControlRoute


T = TypeVar("T", bound="ControlPolicy")


@_attrs_define
class ControlPolicy:
    """A control policy: a deterministic transition over a session of u32 registers, run per event as a chain of at most
    `max_steps` steps of straight-line route bodies. Semantics of each op: README, "Control policy language".

        Attributes:
            name (str): Policy name
            registers (int): u32 registers of the session state
            routes (list[ControlRoute]): Routes, names unique; a new session starts on the first
            version (int): Version; a new version is a new immutable policy with new route ids
            decision (ControlBatchDecision | ControlPerEventDecision | None | Unset):
            durability (ControlPolicyDurability | Unset): When an event is answered. `commit` (default): only once the
                session state it produced is committed to Postgres (commits grouped per batch launch); a crash loses no answered
                event. `snapshot`: as soon as it ran; state is written every `HEARTH_CONTROL_SNAPSHOT_S` seconds and at
                shutdown, so a crash loses the answered events of up to the last snapshot interval. Not part of the route ids.
                Default: ControlPolicyDurability.COMMIT.
            init (list[int] | Unset): Registers of a new session (at most `registers` values; the rest 0)
            inputs (int | Unset): u32 input words an event may carry Default: 0.
            max_steps (int | Unset): H: most observation-free steps one event runs Default: 1.
    """

    name: str
    registers: int
    routes: list[ControlRoute]
    version: int
    decision: ControlBatchDecision | ControlPerEventDecision | None | Unset = UNSET
    durability: ControlPolicyDurability | Unset = ControlPolicyDurability.COMMIT
    init: list[int] | Unset = UNSET
    inputs: int | Unset = 0
    max_steps: int | Unset = 1

    def to_dict(self) -> dict[str, Any]:
        from ..models.control_batch_decision import ControlBatchDecision  # noqa: PLC0415
        from ..models.control_per_event_decision import ControlPerEventDecision  # noqa: PLC0415

        name = self.name

        registers = self.registers

        routes = []
        for routes_item_data in self.routes:
            routes_item = routes_item_data.to_dict()
            routes.append(routes_item)

        version = self.version

        decision: dict[str, Any] | None | Unset
        if isinstance(self.decision, Unset):
            decision = UNSET
        elif isinstance(self.decision, ControlPerEventDecision):
            decision = self.decision.to_dict()
        elif isinstance(self.decision, ControlBatchDecision):
            decision = self.decision.to_dict()
        else:
            decision = self.decision

        durability: str | Unset = UNSET
        if not isinstance(self.durability, Unset):
            durability = self.durability.value

        init: list[int] | Unset = UNSET
        if not isinstance(self.init, Unset):
            init = self.init

        inputs = self.inputs

        max_steps = self.max_steps

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "name": name,
                "registers": registers,
                "routes": routes,
                "version": version,
            }
        )
        if decision is not UNSET:
            field_dict["decision"] = decision
        if durability is not UNSET:
            field_dict["durability"] = durability
        if init is not UNSET:
            field_dict["init"] = init
        if inputs is not UNSET:
            field_dict["inputs"] = inputs
        if max_steps is not UNSET:
            field_dict["max_steps"] = max_steps

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.control_batch_decision import ControlBatchDecision  # noqa: PLC0415
        from ..models.control_per_event_decision import ControlPerEventDecision  # noqa: PLC0415
        from ..models.control_route import ControlRoute  # noqa: PLC0415

        d = dict(src_dict)
        name = d.pop("name")

        registers = d.pop("registers")

        routes = []
        _routes = d.pop("routes")
        for routes_item_data in _routes:
            routes_item = ControlRoute.from_dict(routes_item_data)

            routes.append(routes_item)

        version = d.pop("version")

        def _parse_decision(data: object) -> ControlBatchDecision | ControlPerEventDecision | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_control_decision_type_0 = ControlPerEventDecision.from_dict(data)

                return componentsschemas_control_decision_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_control_decision_type_1 = ControlBatchDecision.from_dict(data)

                return componentsschemas_control_decision_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ControlBatchDecision | ControlPerEventDecision | None | Unset, data)

        decision = _parse_decision(d.pop("decision", UNSET))

        _durability = d.pop("durability", UNSET)
        durability: ControlPolicyDurability | Unset
        if isinstance(_durability, Unset):
            durability = UNSET
        else:
            durability = ControlPolicyDurability(_durability)

        init = cast(list[int], d.pop("init", UNSET))

        inputs = d.pop("inputs", UNSET)

        max_steps = d.pop("max_steps", UNSET)

        control_policy = cls(
            name=name,
            registers=registers,
            routes=routes,
            version=version,
            decision=decision,
            durability=durability,
            init=init,
            inputs=inputs,
            max_steps=max_steps,
        )

        return control_policy
