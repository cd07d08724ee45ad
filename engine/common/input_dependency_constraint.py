"""``pyflink.common.input_dependency_constraint``: a deprecated batch scheduling hint, accepted and ignored."""
from enum import Enum

__all__ = ["InputDependencyConstraint"]


class InputDependencyConstraint(Enum):
    ANY = 0
    ALL = 1
