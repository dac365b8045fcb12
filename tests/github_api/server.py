"""A GitHub REST API on loopback that checks every request against GitHub's OpenAPI description.

Plain `http.server` on 127.0.0.1 with a random port, served from a background thread. Each request
is recorded, validated with openapi-core (path, method, parameters, body), authenticated, then
either caught by an injected fault or answered by `endpoints.Endpoints`. A request GitHub would
refuse is recorded in `violations`; the pytest fixture fails the test when any was recorded.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from openapi_core.exceptions import OpenAPIError
from openapi_core.templating.paths.exceptions import PathError
from openapi_core.testing import MockRequest

from tests.github_api.endpoints import Call, Endpoints, Identity, Reply, error
from tests.github_api.faults import (
    RESOURCE_NOT_ACCESSIBLE,
    SECONDARY_RATE_LIMIT,
    SECONDARY_RATE_LIMIT_DOCS,
    Fault,
    FaultKind,
    FaultPlan,
)
from tests.github_api.resources import PUBLIC_API, Renderer, Store
from tests.github_api.spec import SERVED_PATHS, ApiDescription

DEFAULT_TOKEN = "ghs_loopbackInstallationToken0000000000"
BOT_LOGIN = "github-actions[bot]"


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it, and the status it was answered with (0: none)."""

    method: str
    path: str  # without the API prefix and the query
    query: Mapping[str, str]
    body: Any  # decoded JSON, or None
    login: str | None
    at: float  # time.monotonic() on arrival
    status: int


class ApiServer:
    """The loopback API: start(), point a client at `base_url`, inspect, stop()."""

    def __init__(self, description: ApiDescription, *, prefix: str = "/api/v3", hang_seconds: float = 30.0) -> None:
        self.description = description
        self.prefix = prefix.rstrip("/")
        self.hang_seconds = hang_seconds
        self.store = Store()
        self.faults = FaultPlan()
        self.tokens: dict[str, Identity] = {DEFAULT_TOKEN: Identity(BOT_LOGIN)}
        self.violations: list[str] = []
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._validation_lock = threading.Lock()  # openapi-core's validators are not documented as thread-safe
        self._stopping = threading.Event()
        self._httpd = _HttpServer(("127.0.0.1", 0), _Handler, self)
        host, port = self._httpd.server_address[:2]
        self.origin = f"http://{host!s}:{port}"
        self.endpoints = Endpoints(self.store, Renderer(description, self.base_url, self.origin), self.reject)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)

    @property
    def base_url(self) -> str:
        """What GITHUB_API_URL would be: the origin plus the prefix (GHES serves under /api/v3)."""
        return self.origin + self.prefix

    def start(self) -> ApiServer:
        """Serve from a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Release hanging requests, stop serving and close the socket."""
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def add_token(self, token: str, login: str, *, installation: bool = True, read_only: bool = False) -> None:
        """Accept another token, e.g. a read-only one as a fork's pull request gets."""
        self.tokens[token] = Identity(login, installation, read_only)

    def inject(self, fault: Fault) -> None:
        """Make upcoming matching requests fail (see `faults.Fault`)."""
        self.faults.add(fault)

    def reject(self, message: str) -> None:
        """Record a request GitHub would refuse."""
        with self._lock:
            self.violations.append(message)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in order."""
        with self._lock:
            return list(self._requests)

    def requests_to(self, method: str, path_suffix: str = "") -> list[RecordedRequest]:
        """The recorded requests with this method whose path ends with `path_suffix`."""
        return [r for r in self.requests if r.method == method and r.path.endswith(path_suffix)]

    def answer(self, method: str, target: str, headers: Mapping[str, str], raw_body: bytes) -> Reply | None:
        """`handle`, but a bug in this server fails the test instead of dropping the connection."""
        try:
            return self.handle(method, target, headers, raw_body)
        except Exception as exc:  # any bug here must surface as a violation
            self.reject(f"{method} {target}: loopback server bug: {exc!r}")
            return error(500, "loopback server bug")

    def handle(self, method: str, target: str, headers: Mapping[str, str], raw_body: bytes) -> Reply | None:
        """Answer one request (header names in lower case); None: hang, then drop the connection."""
        arrived = time.monotonic()
        url = urlsplit(target)
        path = url.path[len(self.prefix) :] if url.path.startswith(self.prefix + "/") else url.path
        query = dict(parse_qsl(url.query))
        body, reply = self._decode(raw_body)
        identity = self._identity(headers)
        if reply is None:
            reply = self._respond(method, url.path, path, query, headers, raw_body, body, identity)
        status = 0 if reply is None else reply.status
        login = identity.login if identity else None
        with self._lock:
            self._requests.append(RecordedRequest(method, path, query, body, login, arrived, status))
        if reply is None:  # a hang: recorded on arrival, never answered
            self._stopping.wait(self.hang_seconds)
        return reply

    def _respond(
        self,
        method: str,
        full_path: str,
        path: str,
        query: dict[str, str],
        headers: Mapping[str, str],
        raw_body: bytes,
        body: Any,
        identity: Identity | None,
    ) -> Reply | None:
        if not full_path.startswith(self.prefix + "/"):
            self.reject(f"{method} {full_path}: outside the API root {self.prefix}/")
            return error(404, "Not Found")
        refused = self._validate(method, path, query, headers, raw_body)
        if refused:
            self.reject(f"{method} {path}: {refused.body['message']}")
            return refused
        if identity is None:
            self.reject(f"{method} {path}: no known token in the Authorization header")
            return error(401, "Bad credentials")
        fault = self.faults.take(method, path)
        if fault:
            return self._fault_reply(fault)
        return self._dispatch(method, path, query, body, identity, headers)

    def _dispatch(
        self,
        method: str,
        path: str,
        query: dict[str, str],
        body: Any,
        identity: Identity,
        headers: Mapping[str, str],
    ) -> Reply:
        found = self.endpoints.match(method, path)
        if found is None:
            self.reject(f"{method} {path}: valid for GitHub but not served by the loopback server")
            return error(404, "Not Found")
        route, params = found
        full = "full+json" in headers.get("accept", "")
        return route.handler(Call(method, path, params, query, body, identity, full))

    def _fault_reply(self, fault: Fault) -> Reply | None:
        if fault.kind is FaultKind.HANG:
            return None
        if fault.kind is FaultKind.SERVER_ERROR:
            return Reply(fault.status or 500, {"message": "Server Error"})
        if fault.kind is FaultKind.READ_ONLY:
            return error(403, RESOURCE_NOT_ACCESSIBLE)
        reply = error(fault.status or 403, SECONDARY_RATE_LIMIT, SECONDARY_RATE_LIMIT_DOCS)
        return Reply(reply.status, reply.body, {"Retry-After": str(fault.retry_after)})

    def _decode(self, raw_body: bytes) -> tuple[Any, Reply | None]:
        if not raw_body:
            return None, None
        try:
            return json.loads(raw_body), None
        except ValueError:
            self.reject("request body is not JSON")
            return None, error(400, "Problems parsing JSON")

    def _identity(self, headers: Mapping[str, str]) -> Identity | None:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() not in ("token", "bearer"):
            return None
        return self.tokens.get(token.strip())

    def _validate(
        self,
        method: str,
        path: str,
        query: dict[str, str],
        headers: Mapping[str, str],
        raw_body: bytes,
    ) -> Reply | None:
        content_type = headers.get("content-type", "application/json")
        request = MockRequest(
            PUBLIC_API,
            method,
            path,
            args=query,
            headers=dict(headers),
            data=raw_body or None,
            content_type=content_type,
        )
        try:
            with self._validation_lock:
                self.description.openapi.validate_request(request)
        except PathError as exc:
            served = f"the loopback server serves {len(SERVED_PATHS)} of GitHub's paths"
            return error(404, f"Not Found ({served}): {exc}")
        except OpenAPIError as exc:
            return error(422, f"Invalid request: {describe(exc)}")
        return None


def describe(exc: Exception) -> str:
    """A short message for a validation failure: openapi-core's own repeats the whole body."""
    cause = exc.__cause__
    errors = getattr(cause, "schema_errors", None) or ()
    details = [f"{'/'.join(map(str, e.absolute_path)) or '(body)'}: {e.message[:200]}" for e in errors][:5]
    summary = type(exc).__name__ + (f" ({type(cause).__name__}: {str(cause)[:200]})" if cause and not errors else "")
    return "; ".join([summary, *details])


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True  # a hanging request must not keep the test process alive

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], api: ApiServer) -> None:
        super().__init__(address, handler)
        self.api = api


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as GitHub and requests' connection pool expect
    disable_nagle_algorithm = True  # headers and body go out in two writes: avoid 40 ms delayed-ACK stalls
    server: _HttpServer

    def do_GET(self) -> None:  # http.server dispatches on this name
        """Serve any method the same way: the API server decides."""
        self._serve()

    do_POST = do_PATCH = do_DELETE = do_PUT = do_GET

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw_body = self.rfile.read(length) if length else b""
        headers = {key.lower(): value for key, value in self.headers.items()}
        reply = self.server.api.answer(self.command, self.path, headers, raw_body)
        if reply is None:
            self.close_connection = True
            return
        payload = b"" if reply.body is None else json.dumps(reply.body).encode()
        self.send_response(reply.status)
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: tests read `ApiServer.requests` instead of stderr."""
