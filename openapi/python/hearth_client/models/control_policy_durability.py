from enum import StrEnum


class ControlPolicyDurability(StrEnum):
    COMMIT = "commit"
    SNAPSHOT = "snapshot"

    def __str__(self) -> str:
        return str(self.value)
