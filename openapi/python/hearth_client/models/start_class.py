from enum import StrEnum


class StartClass(StrEnum):
    STANDBY = "standby"
    WARM = "warm"

    def __str__(self) -> str:
        return str(self.value)
