from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.route_ref import RouteRef


T = TypeVar("T", bound="SessionResponse")


@_attrs_define
class SessionResponse:
    """A session.

    Attributes:
        policy_id (UUID):
        route (RouteRef): A route by name and executable id.
        session (str):
        state (list[int]): u32 registers, `0..=4294967295` each
    """

    policy_id: UUID
    route: RouteRef
    session: str
    state: list[int]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        policy_id = str(self.policy_id)

        route = self.route.to_dict()

        session = self.session

        state = self.state

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "policy_id": policy_id,
                "route": route,
                "session": session,
                "state": state,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.route_ref import RouteRef  # noqa: PLC0415

        d = dict(src_dict)
        policy_id = UUID(d.pop("policy_id"))

        route = RouteRef.from_dict(d.pop("route"))

        session = d.pop("session")

        state = cast(list[int], d.pop("state"))

        session_response = cls(
            policy_id=policy_id,
            route=route,
            session=session,
            state=state,
        )

        session_response.additional_properties = d
        return session_response

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
