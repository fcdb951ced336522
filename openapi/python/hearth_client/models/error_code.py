from enum import StrEnum


class ErrorCode(StrEnum):
    AGENT_PROTOCOL = "agent_protocol"
    BIND_FAILED = "bind_failed"
    CANCELLED = "cancelled"
    DEPS_INSTALL_FAILED = "deps_install_failed"
    DISK_QUOTA_EXCEEDED = "disk_quota_exceeded"
    INVALID_OUTPUT = "invalid_output"
    NONZERO_EXIT = "nonzero_exit"
    POD_LOST = "pod_lost"
    POD_START_FAILED = "pod_start_failed"
    RESULT_UNSTORABLE = "result_unstorable"
    SPAWN_FAILED = "spawn_failed"
    STALE_EPOCH = "stale_epoch"
    TIMED_OUT = "timed_out"
    UNKNOWN_BUNDLE = "unknown_bundle"
    UNKNOWN_PROFILE = "unknown_profile"
    UNPLACEABLE = "unplaceable"
    WIPE_FAILED = "wipe_failed"

    def __str__(self) -> str:
        return str(self.value)
