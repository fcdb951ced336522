from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="CreateSessionRequest")


@_attrs_define
class CreateSessionRequest:
    """A session to create.

    Attributes:
        policy (UUID): The policy (`policy_id`).
        session (str): Session name, 1..=128 of `[A-Za-z0-9_.:@-]`.
        route (None | str | Unset): The session's first route, by name or id. Default: the policy's first.
        state (list[int] | None | Unset): u32 registers, `0..=4294967295` each
    """

    policy: UUID
    session: str
    route: None | str | Unset = UNSET
    state: list[int] | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        policy = str(self.policy)

        session = self.session

        route: None | str | Unset
        if isinstance(self.route, Unset):
            route = UNSET
        else:
            route = self.route

        state: list[int] | None | Unset
        if isinstance(self.state, Unset):
            state = UNSET
        elif isinstance(self.state, list):
            state = self.state

        else:
            state = self.state

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "policy": policy,
                "session": session,
            }
        )
        if route is not UNSET:
            field_dict["route"] = route
        if state is not UNSET:
            field_dict["state"] = state

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        policy = UUID(d.pop("policy"))

        session = d.pop("session")

        def _parse_route(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        route = _parse_route(d.pop("route", UNSET))

        def _parse_state(data: object) -> list[int] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                state_type_0 = cast(list[int], data)

                return state_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[int] | None | Unset, data)

        state = _parse_state(d.pop("state", UNSET))

        create_session_request = cls(
            policy=policy,
            session=session,
            route=route,
            state=state,
        )

        return create_session_request
