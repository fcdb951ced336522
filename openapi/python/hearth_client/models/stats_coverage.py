from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="StatsCoverage")


@_attrs_define
class StatsCoverage:
    """What a stats window covers. The event log is kept in memory per tenant
    (at most `records_cap` records, oldest dropped first) since this process
    started; it is not kept across restarts.

        Attributes:
            before_start (bool): The window reaches back before this process started (events of an
                earlier process are not counted).
            complete (bool): Whether the whole requested window is covered (no record of it was
                dropped by the cap and the process ran for all of it).
            complete_from_ns (int): Every finished event released from here to `to_ns` is counted.
            evicted (int): Records dropped by the per-tenant cap since the process started.
            from_ns (int): Start of the requested window, ns on the control clock.
            records (int): Records in the window.
            records_cap (int): The cap on records kept per tenant (`HEARTH_CONTROL_RECORDS`).
            to_ns (int): End of the window (now), ns.
    """

    before_start: bool
    complete: bool
    complete_from_ns: int
    evicted: int
    from_ns: int
    records: int
    records_cap: int
    to_ns: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        before_start = self.before_start

        complete = self.complete

        complete_from_ns = self.complete_from_ns

        evicted = self.evicted

        from_ns = self.from_ns

        records = self.records

        records_cap = self.records_cap

        to_ns = self.to_ns

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "before_start": before_start,
                "complete": complete,
                "complete_from_ns": complete_from_ns,
                "evicted": evicted,
                "from_ns": from_ns,
                "records": records,
                "records_cap": records_cap,
                "to_ns": to_ns,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        before_start = d.pop("before_start")

        complete = d.pop("complete")

        complete_from_ns = d.pop("complete_from_ns")

        evicted = d.pop("evicted")

        from_ns = d.pop("from_ns")

        records = d.pop("records")

        records_cap = d.pop("records_cap")

        to_ns = d.pop("to_ns")

        stats_coverage = cls(
            before_start=before_start,
            complete=complete,
            complete_from_ns=complete_from_ns,
            evicted=evicted,
            from_ns=from_ns,
            records=records,
            records_cap=records_cap,
            to_ns=to_ns,
        )

        stats_coverage.additional_properties = d
        return stats_coverage

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
