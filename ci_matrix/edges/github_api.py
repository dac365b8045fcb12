"""Posting the report through GitHub's REST API with github3.py: a check run and a sticky comment.

Every API failure becomes a `PostOutcome`; nothing here raises for one, because posting a report
must never change a build's result. Transient failures (5xx, timeouts, secondary rate limits) are
retried with exponential backoff, honouring `Retry-After`. A 403 "Resource not accessible by
integration" (the read-only token of a fork's pull request) is not retried: the outcome says
FORBIDDEN and the caller falls back to annotations and the step summary.

The environment is not read here: the caller passes GITHUB_API_URL and the token in `ApiSettings`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, TypeVar

import github3
import requests
from github3 import exceptions as gh_errors
from github3.session import AppInstallationTokenAuth, GitHubSession, TokenAuth

from ci_matrix.edges.report_post import (
    ANNOTATION_MESSAGE_LIMIT,
    OUTPUT_TEXT_LIMIT,
    READ_ONLY_MESSAGE,
    PostStatus,
    RetryPolicy,
    batches,
    classify,
    sticky_body,
    truncate,
    truncate_title,
)

__all__ = [
    "BOT_LOGIN",
    "Annotation",
    "ApiSettings",
    "GitHubReporter",
    "PostOutcome",
    "PostStatus",
    "RetryPolicy",
]

AnnotationLevel = Literal["notice", "warning", "failure"]
Conclusion = Literal["success", "failure", "neutral", "cancelled", "skipped", "timed_out", "action_required"]

BOT_LOGIN = "github-actions[bot]"  # the author of everything GITHUB_TOKEN posts
ENTERPRISE_SUFFIX = "/api/v3"  # GitHub Enterprise Server serves its API under this path

Result = TypeVar("Result")


@dataclass(frozen=True)
class Annotation:
    """One check run annotation on a file's lines."""

    path: str
    start_line: int
    end_line: int
    level: AnnotationLevel
    title: str
    message: str

    def to_json(self) -> dict[str, Any]:
        """The request body's form, cut to GitHub's limits (title 255 characters, message 64 KB)."""
        return {
            "path": self.path,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "annotation_level": self.level,
            "title": truncate_title(self.title),
            "message": truncate(self.message, ANNOTATION_MESSAGE_LIMIT),
        }


@dataclass(frozen=True)
class PostOutcome:
    """The result of one posting; never carries the token."""

    status: PostStatus
    message: str
    url: str = ""  # the check run's or comment's page, when one exists


@dataclass(frozen=True)
class ApiSettings:
    """Where and how to talk to GitHub; `api_url` is GITHUB_API_URL as the runner sets it."""

    api_url: str
    token: str = field(repr=False)
    login: str = ""  # the token's own login; empty: ask GET /user (GITHUB_TOKEN: github-actions[bot])
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)


class _GiveUp(Exception):
    def __init__(self, status: PostStatus, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


_API_ERRORS = (gh_errors.GitHubException, requests.RequestException, ValueError, KeyError)


class GitHubReporter:
    """Posts check runs and sticky comments; `sleep` is injectable so tests need not wait."""

    def __init__(self, settings: ApiSettings, sleep: Callable[[float], None] = time.sleep) -> None:
        self._settings = settings
        self._sleep = sleep
        self._login = settings.login

    def post_check_run(
        self,
        repo: str,
        head_sha: str,
        name: str,
        conclusion: Conclusion,
        title: str,
        summary: str,
        text: str,
        annotations: Sequence[Annotation],
    ) -> PostOutcome:
        """Create a completed check run; annotations go 50 per request (create, then updates)."""
        output = {
            "title": truncate_title(title),
            "summary": truncate(summary, OUTPUT_TEXT_LIMIT),
            "text": truncate(text, OUTPUT_TEXT_LIMIT),
        }
        groups = batches([annotation.to_json() for annotation in annotations])
        with self._client() as client:
            return self._guarded(
                lambda: _CheckRunPost(self, client, output, groups).post(repo, head_sha, name, conclusion)
            )

    def upsert_sticky_comment(self, repo: str, pr_number: int, marker: str, sections: Sequence[str]) -> PostOutcome:
        """Create, update in place, or leave alone the one comment holding `marker` by our login.

        `sections` are markdown blocks, most important first; whole sections are cut from the end
        to keep the body within GitHub's 65,536 characters, and the marker is always kept.
        """
        body = sticky_body(marker, sections)
        with self._client() as client:
            return self._guarded(
                lambda: self.retrying(
                    "update the report comment",
                    lambda: self._upsert(client, repo, pr_number, marker, body),
                )
            )

    def retrying(self, what: str, operation: Callable[[], Result]) -> Result:
        """Run `operation`, retrying transient failures; raise _GiveUp when it cannot succeed."""
        policy = self._settings.retry
        for attempt in range(1, policy.attempts + 1):
            try:
                return operation()
            except _API_ERRORS as exc:
                verdict = classify(exc)
                delay = policy.delay(verdict, attempt)
                if delay is None:
                    tries = f" after {attempt} attempts" if attempt > 1 else ""
                    raise _GiveUp(verdict.status, f"could not {what}{tries}: {verdict.message}") from exc
                self._sleep(delay)
        raise AssertionError("unreachable: the last attempt either returns or gives up")

    def _guarded(self, post: Callable[[], PostOutcome]) -> PostOutcome:
        try:
            return post()
        except _GiveUp as give_up:
            return PostOutcome(give_up.status, self._scrub(give_up.message))

    def _scrub(self, message: str) -> str:
        # Error texts come from the server and from requests; make sure none can echo the token.
        token = self._settings.token
        return message.replace(token, "***") if token else message

    def _client(self) -> _Client:
        return _Client(self._settings)

    def _upsert(self, client: _Client, repo: str, pr_number: int, marker: str, body: str) -> PostOutcome:
        # One unit, retried whole: a retry lists again, so it finds a comment that an attempt which
        # timed out did create, instead of posting a second one.
        login = self._own_login(client.github)
        pull = client.github.pull_request(*_split(repo), pr_number)
        mine = [c for c in pull.issue_comments() if marker in (c.body or "") and c.user.login == login]
        if not mine:
            created = pull.create_comment(body)
            return PostOutcome(PostStatus.POSTED, f"created the report comment on #{pr_number}", created.html_url)
        comment = mine[0]
        if comment.body == body:
            return PostOutcome(
                PostStatus.UNCHANGED,
                f"the report comment on #{pr_number} is up to date",
                comment.html_url,
            )
        comment.edit(body)
        return PostOutcome(PostStatus.POSTED, f"updated the report comment on #{pr_number}", comment.html_url)

    def _own_login(self, github: Any) -> str:
        if not self._login:
            try:
                self._login = github.me().login
            except gh_errors.ForbiddenError as exc:
                if READ_ONLY_MESSAGE not in str(exc.msg):
                    raise
                # Installation tokens (GITHUB_TOKEN) cannot read /user; they post as the bot.
                self._login = BOT_LOGIN
        return self._login


class _CheckRunPost:
    """One check run being posted: create with the first batch, then append the rest."""

    def __init__(self, reporter: GitHubReporter, client: _Client, output: dict[str, str], groups: list[Any]) -> None:
        self._reporter = reporter
        self._client = client
        self._output = output
        self._groups = groups

    def post(self, repo: str, head_sha: str, name: str, conclusion: Conclusion) -> PostOutcome:
        """Create, then update once per further batch; report how far it got."""
        run = self._reporter.retrying("create the check run", lambda: self._create(repo, head_sha, name, conclusion))
        sent = len(self._groups[0])
        for number, group in enumerate(self._groups[1:], start=2):
            try:
                self._reporter.retrying(f"send annotation batch {number}", partial(self._append, run, group))
            except _GiveUp as give_up:
                total = sum(len(g) for g in self._groups)
                message = f"check run created with {sent} of {total} annotations; {give_up.message}"
                return PostOutcome(give_up.status, message, run.html_url)
            sent += len(group)
        plural = "s" if len(self._groups) > 1 else ""
        requests_made = f"{len(self._groups)} request{plural}"
        message = f"check run '{name}' posted with {sent} annotations in {requests_made}"
        return PostOutcome(PostStatus.POSTED, message, run.html_url)

    def _create(self, repo: str, head_sha: str, name: str, conclusion: Conclusion) -> Any:
        repository = self._client.github.repository(*_split(repo))
        output = {**self._output, "annotations": list(self._groups[0])}
        run = repository.create_check_run(name=name, head_sha=head_sha, conclusion=conclusion, output=output)
        if run is None:
            raise ValueError("GitHub answered the check run creation without a body")
        return run

    def _append(self, run: Any, group: Sequence[dict[str, Any]]) -> None:
        # GitHub appends the annotations of each update to those already on the run.
        if not run.update(output={**self._output, "annotations": list(group)}):
            raise ValueError("GitHub answered the check run update without a body")


class _ActionsTokenAuth(AppInstallationTokenAuth):  # type: ignore[misc]
    """GITHUB_TOKEN is an app installation token; github3.py requires this class for check runs.

    It never expires on our side (the runner revokes it after the job) and never shows itself.
    """

    def __init__(self, token: str) -> None:
        TokenAuth.__init__(self, token)
        self.expires_at_str = "the end of the job"

    @property
    def expired(self) -> bool:
        """The runner's token lives as long as the job."""
        return False

    def __repr__(self) -> str:
        return "<GitHub token>"


class _Client:
    """A github3 client for one posting, its HTTP session closed afterwards."""

    def __init__(self, settings: ApiSettings) -> None:
        session = GitHubSession(settings.connect_timeout, settings.read_timeout)
        root = settings.api_url.rstrip("/")
        if root.endswith(ENTERPRISE_SUFFIX):
            self.github = github3.GitHubEnterprise(root.removesuffix(ENTERPRISE_SUFFIX), session=session)
        else:
            self.github = github3.GitHub(session=session)
            session.base_url = root
        session.auth = _ActionsTokenAuth(settings.token)
        self._session = session

    def __enter__(self) -> _Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._session.close()


def _split(repo: str) -> tuple[str, str]:
    owner, _, name = repo.partition("/")
    if not owner or not name or "/" in name:
        raise ValueError(f"repository must be 'owner/name', got {repo!r}")
    return owner, name
