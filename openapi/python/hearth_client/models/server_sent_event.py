from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="ServerSentEvent")


@_attrs_define
class ServerSentEvent:
    """One server-sent event: its `event:` name, `id:` and `data:` (the operation says what each event carries)

    Attributes:
        data (str): The event's data (its `data:` lines joined by newlines)
        event (str | Unset): The event's name
        id (str | Unset): The event's id, to resume after it (`Last-Event-ID`)
        retry (int | Unset): Reconnection time in milliseconds
    """

    data: str
    event: str | Unset = UNSET
    id: str | Unset = UNSET
    retry: int | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = self.data

        event = self.event

        id = self.id

        retry = self.retry

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "data": data,
            }
        )
        if event is not UNSET:
            field_dict["event"] = event
        if id is not UNSET:
            field_dict["id"] = id
        if retry is not UNSET:
            field_dict["retry"] = retry

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        data = d.pop("data")

        event = d.pop("event", UNSET)

        id = d.pop("id", UNSET)

        retry = d.pop("retry", UNSET)

        server_sent_event = cls(
            data=data,
            event=event,
            id=id,
            retry=retry,
        )

        server_sent_event.additional_properties = d
        return server_sent_event

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
