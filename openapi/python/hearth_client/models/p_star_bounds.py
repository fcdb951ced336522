from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="PStarBounds")


@_attrs_define
class PStarBounds:
    """Bounds of P* and how each was computed.

    Attributes:
        bounded_components (int): Components whose exact search hit the cap: their lower bound is a
            feasible schedule from a deadline sweep (the whole window's bound is
            the better of that and the service's own in-time batches of at least
            `K_r`), their upper bound their U.
        bounded_events (int): Events in those components.
        exact_components (int): Route components solved exactly (contiguous-block DP, or the
            launch-point frontier DP within the step cap).
        lower (float): Share covered by a feasible schedule (P* itself when exact).
        lower_events (int):
        max_exact_steps (int): The cap on the exact search, in elementary steps (about 0.1–0.2 s).
        method (str): One sentence: which bound was computed how.
        upper (float): Share no feasible schedule exceeds (P* itself when exact).
        upper_events (int):
    """

    bounded_components: int
    bounded_events: int
    exact_components: int
    lower: float
    lower_events: int
    max_exact_steps: int
    method: str
    upper: float
    upper_events: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        bounded_components = self.bounded_components

        bounded_events = self.bounded_events

        exact_components = self.exact_components

        lower = self.lower

        lower_events = self.lower_events

        max_exact_steps = self.max_exact_steps

        method = self.method

        upper = self.upper

        upper_events = self.upper_events

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "bounded_components": bounded_components,
                "bounded_events": bounded_events,
                "exact_components": exact_components,
                "lower": lower,
                "lower_events": lower_events,
                "max_exact_steps": max_exact_steps,
                "method": method,
                "upper": upper,
                "upper_events": upper_events,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        bounded_components = d.pop("bounded_components")

        bounded_events = d.pop("bounded_events")

        exact_components = d.pop("exact_components")

        lower = d.pop("lower")

        lower_events = d.pop("lower_events")

        max_exact_steps = d.pop("max_exact_steps")

        method = d.pop("method")

        upper = d.pop("upper")

        upper_events = d.pop("upper_events")

        p_star_bounds = cls(
            bounded_components=bounded_components,
            bounded_events=bounded_events,
            exact_components=exact_components,
            lower=lower,
            lower_events=lower_events,
            max_exact_steps=max_exact_steps,
            method=method,
            upper=upper,
            upper_events=upper_events,
        )

        p_star_bounds.additional_properties = d
        return p_star_bounds

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
