from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.p_star_bounds import PStarBounds
    from ..models.stats_coverage import StatsCoverage


T = TypeVar("T", bound="ControlStatsResponse")


@_attrs_define
class ControlStatsResponse:
    """Live accounting of a window of this tenant's event log (shares over all
    its events; F, P* and U from the analyzer run on the same events).

        Attributes:
            a (float): A: share run in a batch of at least `K_r`, exactly, launched by its deadline.
            achieved_events (int):
            batches (int):
            compute_ms (float): Milliseconds spent copying and analysing the window (off the engine).
            coverage (StatsCoverage): What a stats window covers. The event log is kept in memory per tenant
                (at most `records_cap` records, oldest dropped first) since this process
                started; it is not kept across restarts.
            deadline_misses (int): Events whose execution started after their deadline.
            delta_ms (float): δ of the fixed partition F, in milliseconds (the default deadline).
            events (int):
            events_per_s (float): Events per second over the window (first release to last completion).
            exact (bool): Whether `p_star` is exact. False when the exact search for per-event
                deadlines hit its cap: then only `p_star_bounds` hold.
            executor (str): The active executor's status line.
            f (float): F: fixed-partition share (a baseline; with per-event deadlines
                shorter than δ it may exceed P*).
            fallback_share (float): Share of events that ran on the CPU path.
            late_fallbacks (int): CPU-path events that started after their deadline.
            p_star (float): P*: the exact offline optimum share when `exact`, else its lower
                bound (`p_star_bounds.lower`).
            p_star_bounds (PStarBounds): Bounds of P* and how each was computed.
            u (float): U: local upper bound share.
            window_s (float):
            g (float | None | Unset): G = (P* − F)/(U − F); null when U = F or P* is not exact.
            r_a (float | None | Unset): R_A = (A − F)/(P* − F); null when P* = F or P* is not exact.
    """

    a: float
    achieved_events: int
    batches: int
    compute_ms: float
    coverage: StatsCoverage
    deadline_misses: int
    delta_ms: float
    events: int
    events_per_s: float
    exact: bool
    executor: str
    f: float
    fallback_share: float
    late_fallbacks: int
    p_star: float
    p_star_bounds: PStarBounds
    u: float
    window_s: float
    g: float | None | Unset = UNSET
    r_a: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        a = self.a

        achieved_events = self.achieved_events

        batches = self.batches

        compute_ms = self.compute_ms

        coverage = self.coverage.to_dict()

        deadline_misses = self.deadline_misses

        delta_ms = self.delta_ms

        events = self.events

        events_per_s = self.events_per_s

        exact = self.exact

        executor = self.executor

        f = self.f

        fallback_share = self.fallback_share

        late_fallbacks = self.late_fallbacks

        p_star = self.p_star

        p_star_bounds = self.p_star_bounds.to_dict()

        u = self.u

        window_s = self.window_s

        g: float | None | Unset
        if isinstance(self.g, Unset):
            g = UNSET
        else:
            g = self.g

        r_a: float | None | Unset
        if isinstance(self.r_a, Unset):
            r_a = UNSET
        else:
            r_a = self.r_a

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "a": a,
                "achieved_events": achieved_events,
                "batches": batches,
                "compute_ms": compute_ms,
                "coverage": coverage,
                "deadline_misses": deadline_misses,
                "delta_ms": delta_ms,
                "events": events,
                "events_per_s": events_per_s,
                "exact": exact,
                "executor": executor,
                "f": f,
                "fallback_share": fallback_share,
                "late_fallbacks": late_fallbacks,
                "p_star": p_star,
                "p_star_bounds": p_star_bounds,
                "u": u,
                "window_s": window_s,
            }
        )
        if g is not UNSET:
            field_dict["g"] = g
        if r_a is not UNSET:
            field_dict["r_a"] = r_a

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.p_star_bounds import PStarBounds  # noqa: PLC0415
        from ..models.stats_coverage import StatsCoverage  # noqa: PLC0415

        d = dict(src_dict)
        a = d.pop("a")

        achieved_events = d.pop("achieved_events")

        batches = d.pop("batches")

        compute_ms = d.pop("compute_ms")

        coverage = StatsCoverage.from_dict(d.pop("coverage"))

        deadline_misses = d.pop("deadline_misses")

        delta_ms = d.pop("delta_ms")

        events = d.pop("events")

        events_per_s = d.pop("events_per_s")

        exact = d.pop("exact")

        executor = d.pop("executor")

        f = d.pop("f")

        fallback_share = d.pop("fallback_share")

        late_fallbacks = d.pop("late_fallbacks")

        p_star = d.pop("p_star")

        p_star_bounds = PStarBounds.from_dict(d.pop("p_star_bounds"))

        u = d.pop("u")

        window_s = d.pop("window_s")

        def _parse_g(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        g = _parse_g(d.pop("g", UNSET))

        def _parse_r_a(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        r_a = _parse_r_a(d.pop("r_a", UNSET))

        control_stats_response = cls(
            a=a,
            achieved_events=achieved_events,
            batches=batches,
            compute_ms=compute_ms,
            coverage=coverage,
            deadline_misses=deadline_misses,
            delta_ms=delta_ms,
            events=events,
            events_per_s=events_per_s,
            exact=exact,
            executor=executor,
            f=f,
            fallback_share=fallback_share,
            late_fallbacks=late_fallbacks,
            p_star=p_star,
            p_star_bounds=p_star_bounds,
            u=u,
            window_s=window_s,
            g=g,
            r_a=r_a,
        )

        control_stats_response.additional_properties = d
        return control_stats_response

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
