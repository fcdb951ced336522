from enum import StrEnum


class Kind(StrEnum):
    ROLLOUT = "rollout"
    TOOL_CALL = "tool_call"
    VERIFIER = "verifier"

    def __str__(self) -> str:
        return str(self.value)
