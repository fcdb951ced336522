from enum import StrEnum


class Source(StrEnum):
    COLD = "cold"
    STANDBY = "standby"
    WARM = "warm"

    def __str__(self) -> str:
        return str(self.value)
