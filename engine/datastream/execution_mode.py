"""``RuntimeExecutionMode``: STREAMING, BATCH or AUTOMATIC, as in PyFlink."""
from enum import Enum


class RuntimeExecutionMode(str, Enum):
    STREAMING = "STREAMING"
    BATCH = "BATCH"
    AUTOMATIC = "AUTOMATIC"
