from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.caller_pool import CallerPool
    from ..models.leader_response import LeaderResponse
    from ..models.pool_budget import PoolBudget
    from ..models.pool_gpus import PoolGpus
    from ..models.pool_objective import PoolObjective
    from ..models.pool_pods import PoolPods
    from ..models.tenant_pool import TenantPool


T = TypeVar("T", bound="PoolResponse")


@_attrs_define
class PoolResponse:
    """
    Attributes:
        callers (list[CallerPool]): The requesting tenant's callers known to the pool.
        gpus (PoolGpus):
        leader (LeaderResponse): Which replica schedules jobs and holds the pools.
        pods (PoolPods): Pods of the pool by state.
        policy (str): `fresh`, `always-on[:N]`, `keepalive:<s>` or `firepool`.
        profile (str):
        queued_jobs (int): Jobs waiting for pods.
        queued_pods (int):
        standby_target (int): Standby pods the pool keeps now.
        tenant (TenantPool): The requesting tenant's share of the pool.
        budget (None | PoolBudget | Unset):
        objective (None | PoolObjective | Unset):
    """

    callers: list[CallerPool]
    gpus: PoolGpus
    leader: LeaderResponse
    pods: PoolPods
    policy: str
    profile: str
    queued_jobs: int
    queued_pods: int
    standby_target: int
    tenant: TenantPool
    budget: None | PoolBudget | Unset = UNSET
    objective: None | PoolObjective | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.pool_budget import PoolBudget  # noqa: PLC0415
        from ..models.pool_objective import PoolObjective  # noqa: PLC0415

        callers = []
        for callers_item_data in self.callers:
            callers_item = callers_item_data.to_dict()
            callers.append(callers_item)

        gpus = self.gpus.to_dict()

        leader = self.leader.to_dict()

        pods = self.pods.to_dict()

        policy = self.policy

        profile = self.profile

        queued_jobs = self.queued_jobs

        queued_pods = self.queued_pods

        standby_target = self.standby_target

        tenant = self.tenant.to_dict()

        budget: dict[str, Any] | None | Unset
        if isinstance(self.budget, Unset):
            budget = UNSET
        elif isinstance(self.budget, PoolBudget):
            budget = self.budget.to_dict()
        else:
            budget = self.budget

        objective: dict[str, Any] | None | Unset
        if isinstance(self.objective, Unset):
            objective = UNSET
        elif isinstance(self.objective, PoolObjective):
            objective = self.objective.to_dict()
        else:
            objective = self.objective

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "callers": callers,
                "gpus": gpus,
                "leader": leader,
                "pods": pods,
                "policy": policy,
                "profile": profile,
                "queued_jobs": queued_jobs,
                "queued_pods": queued_pods,
                "standby_target": standby_target,
                "tenant": tenant,
            }
        )
        if budget is not UNSET:
            field_dict["budget"] = budget
        if objective is not UNSET:
            field_dict["objective"] = objective

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.caller_pool import CallerPool  # noqa: PLC0415
        from ..models.leader_response import LeaderResponse  # noqa: PLC0415
        from ..models.pool_budget import PoolBudget  # noqa: PLC0415
        from ..models.pool_gpus import PoolGpus  # noqa: PLC0415
        from ..models.pool_objective import PoolObjective  # noqa: PLC0415
        from ..models.pool_pods import PoolPods  # noqa: PLC0415
        from ..models.tenant_pool import TenantPool  # noqa: PLC0415

        d = dict(src_dict)
        callers = []
        _callers = d.pop("callers")
        for callers_item_data in _callers:
            callers_item = CallerPool.from_dict(callers_item_data)

            callers.append(callers_item)

        gpus = PoolGpus.from_dict(d.pop("gpus"))

        leader = LeaderResponse.from_dict(d.pop("leader"))

        pods = PoolPods.from_dict(d.pop("pods"))

        policy = d.pop("policy")

        profile = d.pop("profile")

        queued_jobs = d.pop("queued_jobs")

        queued_pods = d.pop("queued_pods")

        standby_target = d.pop("standby_target")

        tenant = TenantPool.from_dict(d.pop("tenant"))

        def _parse_budget(data: object) -> None | PoolBudget | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                budget_type_0 = PoolBudget.from_dict(data)

                return budget_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | PoolBudget | Unset, data)

        budget = _parse_budget(d.pop("budget", UNSET))

        def _parse_objective(data: object) -> None | PoolObjective | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                objective_type_0 = PoolObjective.from_dict(data)

                return objective_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | PoolObjective | Unset, data)

        objective = _parse_objective(d.pop("objective", UNSET))

        pool_response = cls(
            callers=callers,
            gpus=gpus,
            leader=leader,
            pods=pods,
            policy=policy,
            profile=profile,
            queued_jobs=queued_jobs,
            queued_pods=queued_pods,
            standby_target=standby_target,
            tenant=tenant,
            budget=budget,
            objective=objective,
        )

        pool_response.additional_properties = d
        return pool_response

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
