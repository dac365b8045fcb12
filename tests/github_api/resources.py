"""The loopback server's state (comments, check runs) and its JSON, cut from GitHub's examples.

Response bodies start from the examples in GitHub's own description, so they carry every field a
client such as github3.py reads; only identity, URLs and the state we keep are rewritten.
"""

from __future__ import annotations

import dataclasses
import html
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tests.github_api.spec import ApiDescription

PUBLIC_API = "https://api.github.com"
EXAMPLE_SLUG = "octocat/Hello-World"
TIMESTAMP = "2024-06-01T12:00:00Z"


@dataclass(frozen=True)
class Comment:
    """An issue (or pull request) comment as the server stores it."""

    id: int
    owner: str
    repo: str
    issue: int
    body: str
    login: str


@dataclass(frozen=True)
class CheckRun:
    """A check run with its output and every annotation appended to it so far."""

    id: int
    owner: str
    repo: str
    name: str
    head_sha: str
    status: str
    conclusion: str | None
    output: Mapping[str, Any]
    annotations: tuple[Mapping[str, Any], ...] = ()


class Store:
    """Comments and check runs; one lock, because the HTTP server answers on many threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.comments: dict[int, Comment] = {}
        self.check_runs: dict[int, CheckRun] = {}
        self._next_id = 1000

    def new_id(self) -> int:
        """A fresh id for a comment or check run (call with the lock held)."""
        self._next_id += 1
        return self._next_id

    def add_comment(self, owner: str, repo: str, issue: int, body: str, login: str) -> Comment:
        """Store a new comment; tests also call it to seed comments by other authors."""
        with self.lock:
            comment = Comment(self.new_id(), owner, repo, issue, body, login)
            self.comments[comment.id] = comment
            return comment

    def comments_on(self, owner: str, repo: str, issue: int) -> list[Comment]:
        """The comments of one issue, oldest first."""
        with self.lock:
            found = [c for c in self.comments.values() if (c.owner, c.repo, c.issue) == (owner, repo, issue)]
        return sorted(found, key=lambda comment: comment.id)

    def edit_comment(self, comment_id: int, body: str) -> Comment:
        """Replace a comment's body."""
        with self.lock:
            comment = dataclasses.replace(self.comments[comment_id], body=body)
            self.comments[comment_id] = comment
            return comment

    def put_check_run(self, run: CheckRun) -> None:
        """Store a new or updated check run."""
        with self.lock:
            self.check_runs[run.id] = run


class Renderer:
    """Turns stored values into GitHub's JSON, with URLs that point back at this server."""

    def __init__(self, description: ApiDescription, base_url: str, web_url: str) -> None:
        self._description = description
        self.base_url = base_url
        self.web_url = web_url

    def _example(self, name: str, slug: str) -> Any:
        text = json.dumps(self._description.example(name))
        text = text.replace(PUBLIC_API, self.base_url).replace("https://github.com", self.web_url)
        return json.loads(text.replace(EXAMPLE_SLUG, slug).replace("github/hello-world", slug))

    def user(self, login: str) -> Any:
        """GET /user for a personal token."""
        body = self._example("private-user-response-with-public-and-private-profile-information", login)
        body["login"] = login
        return body

    def repository(self, owner: str, repo: str) -> Any:
        """GET /repos/{owner}/{repo}."""
        body = self._example("full-repository", f"{owner}/{repo}")
        body.update(name=repo, full_name=f"{owner}/{repo}")
        body["owner"]["login"] = owner
        return body

    def pull_request(self, owner: str, repo: str, number: int, full_media_type: bool) -> Any:
        """GET /repos/{owner}/{repo}/pulls/{number}: links lead to this server's comment list."""
        text = json.dumps(self._example("pull-request", f"{owner}/{repo}"))
        for kind in ("pulls", "issues", "pull"):
            text = text.replace(f"/{kind}/1347", f"/{kind}/{number}")
        body = json.loads(text)
        body["number"] = number
        return with_rendered_body(body, full_media_type)

    def issue(self, owner: str, repo: str, number: int, full_media_type: bool) -> Any:
        """GET /repos/{owner}/{repo}/issues/{number}."""
        text = json.dumps(self._example("issue", f"{owner}/{repo}")).replace("/issues/1347", f"/issues/{number}")
        body = json.loads(text)
        body["number"] = number
        return with_rendered_body(body, full_media_type)

    def comment(self, comment: Comment, full_media_type: bool) -> Any:
        """One comment; with `body_text`/`body_html` for the `.full+json` media type."""
        slug = f"{comment.owner}/{comment.repo}"
        body = self._example("issue-comment", slug)
        body.update(
            id=comment.id,
            body=comment.body,
            url=f"{self.base_url}/repos/{slug}/issues/comments/{comment.id}",
            html_url=f"{self.web_url}/{slug}/issues/{comment.issue}#issuecomment-{comment.id}",
            issue_url=f"{self.base_url}/repos/{slug}/issues/{comment.issue}",
            created_at=TIMESTAMP,
            updated_at=TIMESTAMP,
        )
        body["user"].update(login=comment.login, type="Bot" if comment.login.endswith("[bot]") else "User")
        return with_rendered_body(body, full_media_type)

    def check_run(self, run: CheckRun) -> Any:
        """One check run; `output.annotations_count` counts everything appended so far."""
        slug = f"{run.owner}/{run.repo}"
        body = self._example("check-run-example-of-completed-conclusion", slug)
        url = f"{self.base_url}/repos/{slug}/check-runs/{run.id}"
        body.update(
            id=run.id,
            name=run.name,
            head_sha=run.head_sha,
            status=run.status,
            conclusion=run.conclusion,
            url=url,
            html_url=f"{self.web_url}/{slug}/runs/{run.id}",
            started_at=TIMESTAMP,
            completed_at=TIMESTAMP if run.status == "completed" else None,
        )
        output = {key: run.output.get(key) for key in ("title", "summary", "text")}
        body["output"] = {
            **output,
            "annotations_count": len(run.annotations),
            "annotations_url": f"{url}/annotations",
        }
        return body

    def annotation(self, run: CheckRun, annotation: Mapping[str, Any]) -> Any:
        """One stored annotation as GET .../annotations lists it."""
        fields = (
            "path",
            "start_line",
            "end_line",
            "annotation_level",
            "title",
            "message",
            "raw_details",
        )
        body = {key: annotation.get(key) for key in fields}
        body.update(start_column=None, end_column=None)
        body["blob_href"] = f"{self.web_url}/{run.owner}/{run.repo}/blob/{run.head_sha}/{annotation['path']}"
        return body


def with_rendered_body(body: dict[str, Any], full_media_type: bool) -> dict[str, Any]:
    """Add `body_text` and `body_html`, which GitHub sends only for the `.full+json` media type."""
    if full_media_type:
        text = body.get("body") or ""
        body.update(body_text=text, body_html=f"<p>{html.escape(text)}</p>")
    return body
