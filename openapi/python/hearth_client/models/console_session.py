from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="ConsoleSession")


@_attrs_define
class ConsoleSession:
    """A console session: whose it is, when it ends, and the token every
    request that changes something must carry in `X-CSRF-Token`.

        Attributes:
            api_key_id (UUID): The key the session was opened with: revoking it ends the session.
            csrf_token (str): Send it as `X-CSRF-Token` with every request that is not a `GET`,
                `HEAD` or `OPTIONS`. Keep it in memory: `GET /v1/session` gives it
                again after a reload.
            expires_at (datetime.datetime):
            tenant_id (UUID):
            tenant_name (str):
    """

    api_key_id: UUID
    csrf_token: str
    expires_at: datetime.datetime
    tenant_id: UUID
    tenant_name: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        api_key_id = str(self.api_key_id)

        csrf_token = self.csrf_token

        expires_at = self.expires_at.isoformat()

        tenant_id = str(self.tenant_id)

        tenant_name = self.tenant_name

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "api_key_id": api_key_id,
                "csrf_token": csrf_token,
                "expires_at": expires_at,
                "tenant_id": tenant_id,
                "tenant_name": tenant_name,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        api_key_id = UUID(d.pop("api_key_id"))

        csrf_token = d.pop("csrf_token")

        expires_at = datetime.datetime.fromisoformat(d.pop("expires_at"))

        tenant_id = UUID(d.pop("tenant_id"))

        tenant_name = d.pop("tenant_name")

        console_session = cls(
            api_key_id=api_key_id,
            csrf_token=csrf_token,
            expires_at=expires_at,
            tenant_id=tenant_id,
            tenant_name=tenant_name,
        )

        console_session.additional_properties = d
        return console_session

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
