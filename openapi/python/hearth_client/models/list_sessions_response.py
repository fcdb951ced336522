from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.session_response import SessionResponse


T = TypeVar("T", bound="ListSessionsResponse")


@_attrs_define
class ListSessionsResponse:
    """A page of a policy's sessions.

    Attributes:
        held (int): Sessions this tenant holds over all its policies.
        max_sessions (int): The most it may hold (`HEARTH_CONTROL_MAX_SESSIONS`).
        sessions (list[SessionResponse]): By name.
        next_cursor (None | str | Unset): Pass as `cursor` for the next page; null on the last page.
    """

    held: int
    max_sessions: int
    sessions: list[SessionResponse]
    next_cursor: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        held = self.held

        max_sessions = self.max_sessions

        sessions = []
        for sessions_item_data in self.sessions:
            sessions_item = sessions_item_data.to_dict()
            sessions.append(sessions_item)

        next_cursor: None | str | Unset
        if isinstance(self.next_cursor, Unset):
            next_cursor = UNSET
        else:
            next_cursor = self.next_cursor

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "held": held,
                "max_sessions": max_sessions,
                "sessions": sessions,
            }
        )
        if next_cursor is not UNSET:
            field_dict["next_cursor"] = next_cursor

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.session_response import SessionResponse  # noqa: PLC0415

        d = dict(src_dict)
        held = d.pop("held")

        max_sessions = d.pop("max_sessions")

        sessions = []
        _sessions = d.pop("sessions")
        for sessions_item_data in _sessions:
            sessions_item = SessionResponse.from_dict(sessions_item_data)

            sessions.append(sessions_item)

        def _parse_next_cursor(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        next_cursor = _parse_next_cursor(d.pop("next_cursor", UNSET))

        list_sessions_response = cls(
            held=held,
            max_sessions=max_sessions,
            sessions=sessions,
            next_cursor=next_cursor,
        )

        list_sessions_response.additional_properties = d
        return list_sessions_response

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
