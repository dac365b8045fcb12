"""Faults the loopback server can inject: the failures GitHub's API really produces."""

from __future__ import annotations

import enum
import re
import threading
from dataclasses import dataclass

RESOURCE_NOT_ACCESSIBLE = "Resource not accessible by integration"
SECONDARY_RATE_LIMIT = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
    "If you reach out to GitHub Support for help, please include the request ID "
    "0000:0000:0000000:0000000:00000000."
)
SECONDARY_RATE_LIMIT_DOCS = (
    "https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api"
    "#about-secondary-rate-limits"
)
FORBIDDEN_DOCS = "https://docs.github.com/rest/issues/comments#create-an-issue-comment"


class FaultKind(enum.Enum):
    """What an injected fault does to the request it catches."""

    SERVER_ERROR = "server-error"  # 500
    SECONDARY_RATE_LIMIT = "secondary-rate-limit"  # 403 (or 429) with Retry-After
    READ_ONLY = "read-only"  # 403 Resource not accessible by integration
    HANG = "hang"  # no answer until the server stops or `hang_seconds` pass


@dataclass(frozen=True)
class Fault:
    """Catch the next `times` requests whose path matches `path` (and `method`, if given)."""

    kind: FaultKind
    times: int = 1
    path: str = ""  # a regular expression searched in the path (without the API prefix)
    method: str = ""
    status: int = 0  # overrides the status: 429 for a secondary rate limit, 502 for a bad gateway
    retry_after: int = 1

    def catches(self, method: str, path: str) -> bool:
        """Whether this fault applies to a request."""
        if self.method and self.method.upper() != method:
            return False
        return re.search(self.path, path) is not None


class FaultPlan:
    """Pending faults, consumed first come first served; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._left: list[int] = []  # how many more requests each fault catches

    def add(self, fault: Fault) -> None:
        """Queue a fault."""
        with self._lock:
            self._faults.append(fault)
            self._left.append(fault.times)

    def take(self, method: str, path: str) -> Fault | None:
        """The first pending fault that catches this request, counting it down."""
        with self._lock:
            for index, fault in enumerate(self._faults):
                if self._left[index] > 0 and fault.catches(method, path):
                    self._left[index] -= 1
                    return fault
        return None

    def remaining(self) -> int:
        """How many injected faults have not fired yet."""
        with self._lock:
            return sum(self._left)
