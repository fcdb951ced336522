from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.kind import Kind
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.code_bundle import CodeBundle
    from ..models.code_files import CodeFiles
    from ..models.create_job_env_type_0 import CreateJobEnvType0
    from ..models.deps import Deps
    from ..models.topology import Topology


T = TypeVar("T", bound="CreateJob")


@_attrs_define
class CreateJob:
    """A job submission as it arrives on the wire (`POST /v1/jobs`). Only `kind`,
    `profile`, `caller` and `command` are required; only a rollout has a
    `topology`. The bounds are the service's default limits.

        Attributes:
            caller (str): Who submits (an agent, a trainer's worker): its jobs reuse its warm
                pods. 1..=128 characters of `[A-Za-z0-9._:@/-]`, starting alphanumeric. Example: agent-7.
            command (list[str]): The program and its arguments (1..=64, each at most 4096 characters without NUL; the
                program not empty)
            kind (Kind): What a job is for. The kinds run the same way; they are kept apart for
                accounting, filtering and policy.
            profile (str): A profile of this service (`GET /v1/profiles`). Example: cpu-small.
            code (CodeBundle | CodeFiles | None | Unset):
            deps (Deps | None | Unset):
            env (CreateJobEnvType0 | None | Unset): Environment variables (at most 128, 64 KiB in all; values without NUL).
                Hearth sets `HEARTH_INPUT`, `HEARTH_OUTPUT`, `HEARTH_JOB_ID`, `HEARTH_PEERS`, `RANK`, `WORLD_SIZE`,
                `MASTER_ADDR`, `MASTER_PORT`, `VIRTUAL_ENV`, `HEARTH_ATTEMPT`, `TRACEPARENT` itself; they may not be given.
            input_ (Any | Unset): Any JSON value, given to the job on stdin and in `$HEARTH_INPUT`: at most 1 MiB, its
                strings and object keys without NUL (`\\u0000`) at any depth
            priority (int | None | Unset): Higher runs first among queued jobs (default 0).
            timeout_s (int | None | Unset): Seconds the job may run (default 60).
            topology (None | Topology | Unset):
    """

    caller: str
    command: list[str]
    kind: Kind
    profile: str
    code: CodeBundle | CodeFiles | None | Unset = UNSET
    deps: Deps | None | Unset = UNSET
    env: CreateJobEnvType0 | None | Unset = UNSET
    input_: Any | Unset = UNSET
    priority: int | None | Unset = UNSET
    timeout_s: int | None | Unset = UNSET
    topology: None | Topology | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.code_bundle import CodeBundle  # noqa: PLC0415
        from ..models.code_files import CodeFiles  # noqa: PLC0415
        from ..models.create_job_env_type_0 import CreateJobEnvType0  # noqa: PLC0415
        from ..models.deps import Deps  # noqa: PLC0415
        from ..models.topology import Topology  # noqa: PLC0415

        caller = self.caller

        command = self.command

        kind = self.kind.value

        profile = self.profile

        code: dict[str, Any] | None | Unset
        if isinstance(self.code, Unset):
            code = UNSET
        elif isinstance(self.code, CodeFiles):
            code = self.code.to_dict()
        elif isinstance(self.code, CodeBundle):
            code = self.code.to_dict()
        else:
            code = self.code

        deps: dict[str, Any] | None | Unset
        if isinstance(self.deps, Unset):
            deps = UNSET
        elif isinstance(self.deps, Deps):
            deps = self.deps.to_dict()
        else:
            deps = self.deps

        env: dict[str, Any] | None | Unset
        if isinstance(self.env, Unset):
            env = UNSET
        elif isinstance(self.env, CreateJobEnvType0):
            env = self.env.to_dict()
        else:
            env = self.env

        input_ = self.input_

        priority: int | None | Unset
        if isinstance(self.priority, Unset):
            priority = UNSET
        else:
            priority = self.priority

        timeout_s: int | None | Unset
        if isinstance(self.timeout_s, Unset):
            timeout_s = UNSET
        else:
            timeout_s = self.timeout_s

        topology: dict[str, Any] | None | Unset
        if isinstance(self.topology, Unset):
            topology = UNSET
        elif isinstance(self.topology, Topology):
            topology = self.topology.to_dict()
        else:
            topology = self.topology

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "caller": caller,
                "command": command,
                "kind": kind,
                "profile": profile,
            }
        )
        if code is not UNSET:
            field_dict["code"] = code
        if deps is not UNSET:
            field_dict["deps"] = deps
        if env is not UNSET:
            field_dict["env"] = env
        if input_ is not UNSET:
            field_dict["input"] = input_
        if priority is not UNSET:
            field_dict["priority"] = priority
        if timeout_s is not UNSET:
            field_dict["timeout_s"] = timeout_s
        if topology is not UNSET:
            field_dict["topology"] = topology

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.code_bundle import CodeBundle  # noqa: PLC0415
        from ..models.code_files import CodeFiles  # noqa: PLC0415
        from ..models.create_job_env_type_0 import CreateJobEnvType0  # noqa: PLC0415
        from ..models.deps import Deps  # noqa: PLC0415
        from ..models.topology import Topology  # noqa: PLC0415

        d = dict(src_dict)
        caller = d.pop("caller")

        command = cast(list[str], d.pop("command"))

        kind = Kind(d.pop("kind"))

        profile = d.pop("profile")

        def _parse_code(data: object) -> CodeBundle | CodeFiles | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_code_type_0 = CodeFiles.from_dict(data)

                return componentsschemas_code_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_code_type_1 = CodeBundle.from_dict(data)

                return componentsschemas_code_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(CodeBundle | CodeFiles | None | Unset, data)

        code = _parse_code(d.pop("code", UNSET))

        def _parse_deps(data: object) -> Deps | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                deps_type_0 = Deps.from_dict(data)

                return deps_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Deps | None | Unset, data)

        deps = _parse_deps(d.pop("deps", UNSET))

        def _parse_env(data: object) -> CreateJobEnvType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                env_type_0 = CreateJobEnvType0.from_dict(data)

                return env_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(CreateJobEnvType0 | None | Unset, data)

        env = _parse_env(d.pop("env", UNSET))

        input_ = d.pop("input", UNSET)

        def _parse_priority(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        priority = _parse_priority(d.pop("priority", UNSET))

        def _parse_timeout_s(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        timeout_s = _parse_timeout_s(d.pop("timeout_s", UNSET))

        def _parse_topology(data: object) -> None | Topology | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                topology_type_0 = Topology.from_dict(data)

                return topology_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Topology | Unset, data)

        topology = _parse_topology(d.pop("topology", UNSET))

        create_job = cls(
            caller=caller,
            command=command,
            kind=kind,
            profile=profile,
            code=code,
            deps=deps,
            env=env,
            input_=input_,
            priority=priority,
            timeout_s=timeout_s,
            topology=topology,
        )

        return create_job
