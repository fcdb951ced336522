from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.effect_response import EffectResponse
    from ..models.route_ref import RouteRef


T = TypeVar("T", bound="EventResult")


@_attrs_define
class EventResult:
    """How and what one event ran. Times are nanoseconds since the service's
    control epoch.

        Attributes:
            batch_size (int): Events in its batch (1 on the CPU path).
            deadline_ns (int):
            done_ns (int):
            exact (bool): Whether the outcome is the CPU reference's.
            executor (str): `cpu` or `gpu`.
            index (int): Position of the event in the request.
            launch_ns (int):
            on_time (bool): Whether execution started no later than the deadline.
            path (str): `batch` (on the active executor) or `fallback` (alone on the CPU path).
            ran (RouteRef): A route by name and executable id.
            release_ns (int):
            route (RouteRef): A route by name and executable id.
            session (str):
            state (list[int]): u32 registers, `0..=4294967295` each
            steps (int): Steps of the chain, 1..=max_steps.
            batch (int | None | Unset): Batch id (null on the CPU path).
            effect (EffectResponse | None | Unset):
            fallback_reason (None | str | Unset): Why it fell back: `no_batch`, `deadline`, `drain`.
    """

    batch_size: int
    deadline_ns: int
    done_ns: int
    exact: bool
    executor: str
    index: int
    launch_ns: int
    on_time: bool
    path: str
    ran: RouteRef
    release_ns: int
    route: RouteRef
    session: str
    state: list[int]
    steps: int
    batch: int | None | Unset = UNSET
    effect: EffectResponse | None | Unset = UNSET
    fallback_reason: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.effect_response import EffectResponse  # noqa: PLC0415

        batch_size = self.batch_size

        deadline_ns = self.deadline_ns

        done_ns = self.done_ns

        exact = self.exact

        executor = self.executor

        index = self.index

        launch_ns = self.launch_ns

        on_time = self.on_time

        path = self.path

        ran = self.ran.to_dict()

        release_ns = self.release_ns

        route = self.route.to_dict()

        session = self.session

        state = self.state

        steps = self.steps

        batch: int | None | Unset
        if isinstance(self.batch, Unset):
            batch = UNSET
        else:
            batch = self.batch

        effect: dict[str, Any] | None | Unset
        if isinstance(self.effect, Unset):
            effect = UNSET
        elif isinstance(self.effect, EffectResponse):
            effect = self.effect.to_dict()
        else:
            effect = self.effect

        fallback_reason: None | str | Unset
        if isinstance(self.fallback_reason, Unset):
            fallback_reason = UNSET
        else:
            fallback_reason = self.fallback_reason

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "batch_size": batch_size,
                "deadline_ns": deadline_ns,
                "done_ns": done_ns,
                "exact": exact,
                "executor": executor,
                "index": index,
                "launch_ns": launch_ns,
                "on_time": on_time,
                "path": path,
                "ran": ran,
                "release_ns": release_ns,
                "route": route,
                "session": session,
                "state": state,
                "steps": steps,
            }
        )
        if batch is not UNSET:
            field_dict["batch"] = batch
        if effect is not UNSET:
            field_dict["effect"] = effect
        if fallback_reason is not UNSET:
            field_dict["fallback_reason"] = fallback_reason

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.effect_response import EffectResponse  # noqa: PLC0415
        from ..models.route_ref import RouteRef  # noqa: PLC0415

        d = dict(src_dict)
        batch_size = d.pop("batch_size")

        deadline_ns = d.pop("deadline_ns")

        done_ns = d.pop("done_ns")

        exact = d.pop("exact")

        executor = d.pop("executor")

        index = d.pop("index")

        launch_ns = d.pop("launch_ns")

        on_time = d.pop("on_time")

        path = d.pop("path")

        ran = RouteRef.from_dict(d.pop("ran"))

        release_ns = d.pop("release_ns")

        route = RouteRef.from_dict(d.pop("route"))

        session = d.pop("session")

        state = cast(list[int], d.pop("state"))

        steps = d.pop("steps")

        def _parse_batch(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        batch = _parse_batch(d.pop("batch", UNSET))

        def _parse_effect(data: object) -> EffectResponse | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                effect_type_0 = EffectResponse.from_dict(data)

                return effect_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(EffectResponse | None | Unset, data)

        effect = _parse_effect(d.pop("effect", UNSET))

        def _parse_fallback_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        fallback_reason = _parse_fallback_reason(d.pop("fallback_reason", UNSET))

        event_result = cls(
            batch_size=batch_size,
            deadline_ns=deadline_ns,
            done_ns=done_ns,
            exact=exact,
            executor=executor,
            index=index,
            launch_ns=launch_ns,
            on_time=on_time,
            path=path,
            ran=ran,
            release_ns=release_ns,
            route=route,
            session=session,
            state=state,
            steps=steps,
            batch=batch,
            effect=effect,
            fallback_reason=fallback_reason,
        )

        event_result.additional_properties = d
        return event_result

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
