from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="EventRequest")


@_attrs_define
class EventRequest:
    """One event.

    Attributes:
        policy (UUID): The policy (`policy_id`).
        session (str): Session name, 1..=128 of `[A-Za-z0-9_.:@-]`; created from the policy's
            `init` on its first event.
        deadline_ms (float | None | Unset): Launch deadline after the event is ready (on arrival, or when the
            session's previous event is done), in milliseconds (default: the
            service's); at most the service's `max_deadline_ms` (60,000 by default).
        input_ (list[int] | Unset): u32 input words, `0..=4294967295` each
        route (None | str | Unset): Route name or executable route id (one the policy has); absent: the
            session's next route (as chosen by its last event; the first route
            for a new session).
    """

    policy: UUID
    session: str
    deadline_ms: float | None | Unset = UNSET
    input_: list[int] | Unset = UNSET
    route: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        policy = str(self.policy)

        session = self.session

        deadline_ms: float | None | Unset
        if isinstance(self.deadline_ms, Unset):
            deadline_ms = UNSET
        else:
            deadline_ms = self.deadline_ms

        input_: list[int] | Unset = UNSET
        if not isinstance(self.input_, Unset):
            input_ = self.input_

        route: None | str | Unset
        if isinstance(self.route, Unset):
            route = UNSET
        else:
            route = self.route

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "policy": policy,
                "session": session,
            }
        )
        if deadline_ms is not UNSET:
            field_dict["deadline_ms"] = deadline_ms
        if input_ is not UNSET:
            field_dict["input"] = input_
        if route is not UNSET:
            field_dict["route"] = route

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        policy = UUID(d.pop("policy"))

        session = d.pop("session")

        def _parse_deadline_ms(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        deadline_ms = _parse_deadline_ms(d.pop("deadline_ms", UNSET))

        input_ = cast(list[int], d.pop("input", UNSET))

        def _parse_route(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        route = _parse_route(d.pop("route", UNSET))

        event_request = cls(
            policy=policy,
            session=session,
            deadline_ms=deadline_ms,
            input_=input_,
            route=route,
        )

        return event_request
