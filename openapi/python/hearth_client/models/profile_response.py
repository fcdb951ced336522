from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.pod_counts import PodCounts
    from ..models.profile_response_node_selector import ProfileResponseNodeSelector
    from ..models.start_objective import StartObjective


T = TypeVar("T", bound="ProfileResponse")


@_attrs_define
class ProfileResponse:
    """A profile as the API shows it: its definition, this service's pods of it
    and what the runtime cannot enforce. Every field is always sent.

        Attributes:
            cpu_millis (int): CPU limit in millicores.
            description (str):
            disk_mib (int): Disk quota of the pod's writable directories in MiB; zero for none.
            gpus (int): Whole GPUs per pod; zero for CPU profiles.
            image (str): Container image of the pod (used by the Kubernetes runtime).
            keep_alive_s (int): How long a finished pod stays warm for its caller, in seconds.
            max_pods (int): Most pods of this profile alive at once.
            memory_mib (int): Memory limit in MiB.
            name (str):
            network (bool): Whether jobs may reach the network.
            node_selector (ProfileResponseNodeSelector): Kubernetes node selector.
            pids (int): Process limit of the pod.
            pods (PodCounts): Pods of one profile by state, for the profiles API.
            start_objective (StartObjective): A start-latency objective: at least `percentile` of a pool's jobs start
                on a pod of `class`. The `firepool` policy chooses each caller's
                keep-alive to reach it at the least GPU time the callers' pauses allow:
                capacity goes where a caller's pauses make warm starts cheap.
            warnings (list[str]): Limits of the profile the runtime cannot enforce here.
    """

    cpu_millis: int
    description: str
    disk_mib: int
    gpus: int
    image: str
    keep_alive_s: int
    max_pods: int
    memory_mib: int
    name: str
    network: bool
    node_selector: ProfileResponseNodeSelector
    pids: int
    pods: PodCounts
    start_objective: StartObjective
    warnings: list[str]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        cpu_millis = self.cpu_millis

        description = self.description

        disk_mib = self.disk_mib

        gpus = self.gpus

        image = self.image

        keep_alive_s = self.keep_alive_s

        max_pods = self.max_pods

        memory_mib = self.memory_mib

        name = self.name

        network = self.network

        node_selector = self.node_selector.to_dict()

        pids = self.pids

        pods = self.pods.to_dict()

        start_objective = self.start_objective.to_dict()

        warnings = self.warnings

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "cpu_millis": cpu_millis,
                "description": description,
                "disk_mib": disk_mib,
                "gpus": gpus,
                "image": image,
                "keep_alive_s": keep_alive_s,
                "max_pods": max_pods,
                "memory_mib": memory_mib,
                "name": name,
                "network": network,
                "node_selector": node_selector,
                "pids": pids,
                "pods": pods,
                "start_objective": start_objective,
                "warnings": warnings,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.pod_counts import PodCounts  # noqa: PLC0415
        from ..models.profile_response_node_selector import ProfileResponseNodeSelector  # noqa: PLC0415
        from ..models.start_objective import StartObjective  # noqa: PLC0415

        d = dict(src_dict)
        cpu_millis = d.pop("cpu_millis")

        description = d.pop("description")

        disk_mib = d.pop("disk_mib")

        gpus = d.pop("gpus")

        image = d.pop("image")

        keep_alive_s = d.pop("keep_alive_s")

        max_pods = d.pop("max_pods")

        memory_mib = d.pop("memory_mib")

        name = d.pop("name")

        network = d.pop("network")

        node_selector = ProfileResponseNodeSelector.from_dict(d.pop("node_selector"))

        pids = d.pop("pids")

        pods = PodCounts.from_dict(d.pop("pods"))

        start_objective = StartObjective.from_dict(d.pop("start_objective"))

        warnings = cast(list[str], d.pop("warnings"))

        profile_response = cls(
            cpu_millis=cpu_millis,
            description=description,
            disk_mib=disk_mib,
            gpus=gpus,
            image=image,
            keep_alive_s=keep_alive_s,
            max_pods=max_pods,
            memory_mib=memory_mib,
            name=name,
            network=network,
            node_selector=node_selector,
            pids=pids,
            pods=pods,
            start_objective=start_objective,
            warnings=warnings,
        )

        profile_response.additional_properties = d
        return profile_response

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
