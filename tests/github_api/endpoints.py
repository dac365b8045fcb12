"""What each served endpoint does: GitHub's behaviour for comments, check runs and their limits."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from tests.github_api.faults import FORBIDDEN_DOCS, RESOURCE_NOT_ACCESSIBLE
from tests.github_api.resources import CheckRun, Renderer, Store

# GitHub's limits that the OpenAPI description does not state as schema keywords.
COMMENT_BODY_MAX_CHARS = 65_536
OUTPUT_TEXT_MAX_BYTES = 65_535
ANNOTATION_TITLE_MAX_CHARS = 255
ANNOTATION_MESSAGE_MAX_BYTES = 64 * 1024
PER_PAGE_DEFAULT, PER_PAGE_MAX = 30, 100


@dataclass(frozen=True)
class Identity:
    """Who a token belongs to. Installation tokens (GITHUB_TOKEN) cannot read /user."""

    login: str
    installation: bool = True
    read_only: bool = False


@dataclass(frozen=True)
class Call:
    """A request that passed validation and authentication, ready for its endpoint."""

    method: str
    path: str
    params: Mapping[str, str]
    query: Mapping[str, str]
    body: Any
    identity: Identity
    full_media_type: bool


@dataclass(frozen=True)
class Reply:
    """An answer: status, JSON body (None for no body) and extra headers."""

    status: int
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)


def error(status: int, message: str, documentation_url: str = "https://docs.github.com/rest") -> Reply:
    """GitHub's `basic-error` body."""
    return Reply(status, {"message": message, "documentation_url": documentation_url, "status": str(status)})


def validation_failed(resource: str, field_name: str, message: str) -> Reply:
    """GitHub's 422 `validation-error` body."""
    detail = {"resource": resource, "code": "custom", "field": field_name, "message": message}
    body = {
        "message": "Validation Failed",
        "errors": [detail],
        "documentation_url": "https://docs.github.com/rest",
    }
    return Reply(422, body)


Handler = Callable[[Call], Reply]


@dataclass(frozen=True)
class Route:
    """One method on one path template of the description."""

    method: str
    template: str
    handler: Handler
    pattern: re.Pattern[str]


def _compile(template: str) -> re.Pattern[str]:
    numeric = ("pull_number", "issue_number", "comment_id", "check_run_id")

    def group(match: re.Match[str]) -> str:
        name = match.group(1)
        return f"(?P<{name}>[0-9]+)" if name in numeric else f"(?P<{name}>[^/]+)"

    return re.compile("^" + re.sub(r"\{(\w+)\}", group, template) + "$")


class Endpoints:
    """The handlers; `reject` records a request GitHub would refuse (the test then fails)."""

    def __init__(self, store: Store, renderer: Renderer, reject: Callable[[str], None]) -> None:
        self.store = store
        self.render = renderer
        self.reject = reject
        table: Sequence[tuple[str, str, Handler]] = (
            ("GET", "/user", self.get_user),
            ("GET", "/repos/{owner}/{repo}", self.get_repository),
            ("GET", "/repos/{owner}/{repo}/pulls/{pull_number}", self.get_pull_request),
            ("GET", "/repos/{owner}/{repo}/issues/{issue_number}", self.get_issue),
            ("GET", "/repos/{owner}/{repo}/issues/{issue_number}/comments", self.list_comments),
            ("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments", self.create_comment),
            ("GET", "/repos/{owner}/{repo}/issues/comments/{comment_id}", self.get_comment),
            ("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}", self.update_comment),
            ("DELETE", "/repos/{owner}/{repo}/issues/comments/{comment_id}", self.delete_comment),
            ("POST", "/repos/{owner}/{repo}/check-runs", self.create_check_run),
            ("GET", "/repos/{owner}/{repo}/check-runs/{check_run_id}", self.get_check_run),
            ("PATCH", "/repos/{owner}/{repo}/check-runs/{check_run_id}", self.update_check_run),
            (
                "GET",
                "/repos/{owner}/{repo}/check-runs/{check_run_id}/annotations",
                self.list_annotations,
            ),
        )
        self.routes = tuple(Route(m, t, h, _compile(t)) for m, t, h in table)

    def match(self, method: str, path: str) -> tuple[Route, dict[str, str]] | None:
        """The route serving this request, with its path parameters."""
        for route in self.routes:
            found = route.pattern.match(path)
            if found and route.method == method:
                return route, found.groupdict()
        return None

    def get_user(self, call: Call) -> Reply:
        """Installation tokens get 403 here, as GITHUB_TOKEN does on github.com."""
        if call.identity.installation:
            return error(403, RESOURCE_NOT_ACCESSIBLE, "https://docs.github.com/rest/users/users")
        return Reply(200, self.render.user(call.identity.login))

    def get_repository(self, call: Call) -> Reply:
        """GET /repos/{owner}/{repo}."""
        return Reply(200, self.render.repository(call.params["owner"], call.params["repo"]))

    def get_pull_request(self, call: Call) -> Reply:
        """Every pull request number exists."""
        p = call.params
        return Reply(
            200,
            self.render.pull_request(p["owner"], p["repo"], int(p["pull_number"]), call.full_media_type),
        )

    def get_issue(self, call: Call) -> Reply:
        """Every issue number exists."""
        p = call.params
        return Reply(
            200,
            self.render.issue(p["owner"], p["repo"], int(p["issue_number"]), call.full_media_type),
        )

    def list_comments(self, call: Call) -> Reply:
        """One page of an issue's comments, with a Link header like GitHub's."""
        p = call.params
        comments = self.store.comments_on(p["owner"], p["repo"], int(p["issue_number"]))
        page, headers = self._page(call, comments)
        return Reply(200, [self.render.comment(c, call.full_media_type) for c in page], headers)

    def create_comment(self, call: Call) -> Reply:
        """POST a comment; refused for read-only tokens and bodies over 65,536 characters."""
        if call.identity.read_only:
            return error(403, RESOURCE_NOT_ACCESSIBLE, FORBIDDEN_DOCS)
        too_long = self._comment_too_long(call.body["body"])
        if too_long:
            return too_long
        p = call.params
        comment = self.store.add_comment(
            p["owner"], p["repo"], int(p["issue_number"]), call.body["body"], call.identity.login
        )
        return Reply(201, self.render.comment(comment, call.full_media_type))

    def get_comment(self, call: Call) -> Reply:
        """GET one comment."""
        comment = self.store.comments.get(int(call.params["comment_id"]))
        if comment is None:
            return error(404, "Not Found")
        return Reply(200, self.render.comment(comment, call.full_media_type))

    def update_comment(self, call: Call) -> Reply:
        """PATCH a comment's body in place."""
        comment_id = int(call.params["comment_id"])
        if call.identity.read_only:
            return error(403, RESOURCE_NOT_ACCESSIBLE, FORBIDDEN_DOCS)
        if comment_id not in self.store.comments:
            return error(404, "Not Found")
        too_long = self._comment_too_long(call.body["body"])
        if too_long:
            return too_long
        edited = self.store.edit_comment(comment_id, call.body["body"])
        return Reply(200, self.render.comment(edited, call.full_media_type))

    def delete_comment(self, call: Call) -> Reply:
        """DELETE a comment."""
        if call.identity.read_only:
            return error(403, RESOURCE_NOT_ACCESSIBLE, FORBIDDEN_DOCS)
        with self.store.lock:
            removed = self.store.comments.pop(int(call.params["comment_id"]), None)
        return Reply(204) if removed else error(404, "Not Found")

    def create_check_run(self, call: Call) -> Reply:
        """POST a check run with the first (at most 50) annotations."""
        if call.identity.read_only:
            return error(403, RESOURCE_NOT_ACCESSIBLE, "https://docs.github.com/rest/checks/runs")
        output = call.body.get("output", {})
        refused = self._output_refused(output)
        if refused:
            return refused
        with self.store.lock:
            run_id = self.store.new_id()
        run = CheckRun(
            id=run_id,
            owner=call.params["owner"],
            repo=call.params["repo"],
            name=call.body["name"],
            head_sha=call.body["head_sha"],
            status="completed" if call.body.get("conclusion") else call.body.get("status", "queued"),
            conclusion=call.body.get("conclusion"),
            output={k: v for k, v in output.items() if k != "annotations"},
            annotations=tuple(output.get("annotations", ())),
        )
        self.store.put_check_run(run)
        return Reply(201, self.render.check_run(run))

    def get_check_run(self, call: Call) -> Reply:
        """GET one check run."""
        run = self.store.check_runs.get(int(call.params["check_run_id"]))
        return Reply(200, self.render.check_run(run)) if run else error(404, "Not Found")

    def update_check_run(self, call: Call) -> Reply:
        """PATCH a check run: output fields replace, annotations are appended (GitHub's rule)."""
        run = self.store.check_runs.get(int(call.params["check_run_id"]))
        if run is None:
            return error(404, "Not Found")
        if call.identity.read_only:
            return error(403, RESOURCE_NOT_ACCESSIBLE, "https://docs.github.com/rest/checks/runs")
        output = call.body.get("output", {})
        refused = self._output_refused(output)
        if refused:
            return refused
        updated = _updated_run(run, call.body, output)
        self.store.put_check_run(updated)
        return Reply(200, self.render.check_run(updated))

    def list_annotations(self, call: Call) -> Reply:
        """One page of a check run's annotations."""
        run = self.store.check_runs.get(int(call.params["check_run_id"]))
        if run is None:
            return error(404, "Not Found")
        page, headers = self._page(call, list(run.annotations))
        return Reply(200, [self.render.annotation(run, a) for a in page], headers)

    def _comment_too_long(self, body: str) -> Reply | None:
        if len(body) <= COMMENT_BODY_MAX_CHARS:
            return None
        message = f"Body is too long (maximum is {COMMENT_BODY_MAX_CHARS} characters)"
        self.reject(f"comment body of {len(body)} characters: {message}")
        return validation_failed("IssueComment", "body", message)

    def _output_refused(self, output: Mapping[str, Any]) -> Reply | None:
        for problem in _output_problems(output):
            self.reject(f"check run output: {problem}")
            return validation_failed("CheckRun", "output", problem)
        return None

    def _page(self, call: Call, items: Sequence[Any]) -> tuple[Sequence[Any], dict[str, str]]:
        per_page = min(int(call.query.get("per_page", PER_PAGE_DEFAULT)), PER_PAGE_MAX)
        page = max(int(call.query.get("page", 1)), 1)
        last = max((len(items) + per_page - 1) // per_page, 1)
        links = [(rel, number) for rel, number in (("next", page + 1), ("last", last)) if page < last]
        links += [(rel, number) for rel, number in (("first", 1), ("prev", page - 1)) if page > 1]
        url = self.render.base_url + call.path
        header = ", ".join(f'<{url}?{urlencode({"per_page": per_page, "page": n})}>; rel="{rel}"' for rel, n in links)
        return items[(page - 1) * per_page : page * per_page], ({"Link": header} if header else {})


def _updated_run(run: CheckRun, body: Mapping[str, Any], output: Mapping[str, Any]) -> CheckRun:
    fields = {k: v for k, v in output.items() if k != "annotations"}
    conclusion = body.get("conclusion", run.conclusion)
    return CheckRun(
        id=run.id,
        owner=run.owner,
        repo=run.repo,
        name=body.get("name", run.name),
        head_sha=run.head_sha,
        status="completed" if conclusion else body.get("status", run.status),
        conclusion=conclusion,
        output={**run.output, **fields},
        annotations=run.annotations + tuple(output.get("annotations", ())),
    )


def _output_problems(output: Mapping[str, Any]) -> list[str]:
    problems = [
        f"{key} is {len(output[key].encode())} bytes (maximum is {OUTPUT_TEXT_MAX_BYTES})"
        for key in ("summary", "text")
        if len(output.get(key, "").encode()) > OUTPUT_TEXT_MAX_BYTES
    ]
    for index, annotation in enumerate(output.get("annotations", ())):
        if len(annotation.get("title", "")) > ANNOTATION_TITLE_MAX_CHARS:
            problems.append(f"annotations[{index}].title is longer than {ANNOTATION_TITLE_MAX_CHARS} characters")
        if len(annotation["message"].encode()) > ANNOTATION_MESSAGE_MAX_BYTES:
            problems.append(f"annotations[{index}].message is larger than 64 KB")
    return problems
