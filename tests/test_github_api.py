"""Posting the report with github3.py to the loopback GitHub API, faults included.

The server checks every request against GitHub's OpenAPI description and GitHub's documented
limits; the `github_api` fixture fails a test whose client sent anything GitHub would refuse.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from openapi_core.testing import MockRequest, MockResponse

from ci_matrix.edges.github_api import (
    BOT_LOGIN,
    Annotation,
    ApiSettings,
    GitHubReporter,
    PostStatus,
    RetryPolicy,
)
from ci_matrix.edges.report_post import COMMENT_BODY_LIMIT, size, sticky_body, truncate
from tests.github_api.faults import Fault, FaultKind
from tests.github_api.server import DEFAULT_TOKEN, ApiServer
from tests.github_api.spec import ENV_VAR, ApiDescription, SpecNotFound, locate

REPO = "acme/widgets"
PR = 7
SHA = "4c5f6a8e0b1d2c3e4f5a6b7c8d9e0f1a2b3c4d5e"
MARKER = "<!-- ci-matrix:report -->"
FAST = RetryPolicy(attempts=3, first_delay=0.01, max_delay=0.05)


def reporter(
    server: ApiServer, sleeps: list[float], token: str = DEFAULT_TOKEN, read_timeout: float = 5.0
) -> GitHubReporter:
    settings = ApiSettings(server.base_url, token, connect_timeout=2.0, read_timeout=read_timeout, retry=FAST)
    return GitHubReporter(settings, sleep=sleeps.append)


def markers_by(server: ApiServer, login: str) -> list[str]:
    comments = server.store.comments_on("acme", "widgets", PR)
    return [c.body for c in comments if MARKER in c.body and c.login == login]


def failures(count: int) -> list[Annotation]:
    return [Annotation(f"src/k{i}.cu", i + 1, i + 1, "failure", f"kernel {i}", f"error {i}") for i in range(count)]


def test_one_sticky_comment_after_several_pushes(github_api: ApiServer) -> None:
    # Another author's comment with the same marker, and enough chatter to need a second page.
    github_api.store.add_comment("acme", "widgets", PR, f"{MARKER}\nquoted by a human", "octocat")
    for n in range(120):
        github_api.store.add_comment("acme", "widgets", PR, f"comment {n}", "octocat")
    sleeps: list[float] = []
    post = reporter(github_api, sleeps)

    first = post.upsert_sticky_comment(REPO, PR, MARKER, ["## 2 failures", "cell a"])
    again = post.upsert_sticky_comment(REPO, PR, MARKER, ["## 2 failures", "cell a"])
    fixed = post.upsert_sticky_comment(REPO, PR, MARKER, ["## 1 failure", "cell b"])

    assert [first.status, again.status, fixed.status] == [
        PostStatus.POSTED,
        PostStatus.UNCHANGED,
        PostStatus.POSTED,
    ]
    assert markers_by(github_api, BOT_LOGIN) == [f"{MARKER}\n\n## 1 failure\n\ncell b"]
    assert markers_by(github_api, "octocat") == [f"{MARKER}\nquoted by a human"]
    assert len(github_api.requests_to("POST", f"/issues/{PR}/comments")) == 1
    assert len(github_api.requests_to("PATCH")) == 1
    pages = {r.query.get("page", "1") for r in github_api.requests_to("GET", f"/issues/{PR}/comments")}
    assert pages == {"1", "2"}
    assert fixed.url.endswith(f"/issues/{PR}#issuecomment-{first.url.rsplit('-', 1)[1]}")
    assert sleeps == []


def test_personal_token_comments_as_its_own_login(github_api: ApiServer) -> None:
    github_api.add_token("ghp_personal", "release-bot", installation=False)
    sleeps: list[float] = []

    outcome = reporter(github_api, sleeps, token="ghp_personal").upsert_sticky_comment(REPO, PR, MARKER, ["report"])

    assert outcome.status is PostStatus.POSTED
    assert markers_by(github_api, "release-bot") == [f"{MARKER}\n\nreport"]
    assert [r.status for r in github_api.requests_to("GET", "/user")] == [200]


def test_120_annotations_go_in_batches_of_50(github_api: ApiServer) -> None:
    sleeps: list[float] = []
    long_one = Annotation("a.rs", 1, 2, "warning", "t" * 300, "m" * 70_000)

    outcome = reporter(github_api, sleeps).post_check_run(
        REPO,
        SHA,
        "ci-matrix",
        "failure",
        "x" * 300,
        "s" * 70_000,
        "details",
        [*failures(119), long_one],
    )

    assert outcome.status is PostStatus.POSTED, outcome.message
    created = github_api.requests_to("POST", "/check-runs")
    updates = github_api.requests_to("PATCH", "/check-runs/" + outcome.url.rsplit("/", 1)[1])
    sent = [len(r.body["output"]["annotations"]) for r in created + updates]
    assert sent == [50, 50, 20]
    (run,) = github_api.store.check_runs.values()
    assert [a["path"] for a in run.annotations[:119]] == [f"src/k{i}.cu" for i in range(119)]
    assert len(run.annotations[119]["title"]) == 255
    assert size(run.annotations[119]["message"]) <= 64 * 1024
    assert size(run.output["summary"]) <= 65_535
    assert "truncated" in run.output["summary"]
    assert (run.status, run.conclusion) == ("completed", "failure")


def test_too_long_comment_cuts_sections_and_keeps_the_marker(github_api: ApiServer) -> None:
    sections = [f"## cell {n}\n" + "x" * 10_000 for n in range(10)]

    outcome = reporter(github_api, []).upsert_sticky_comment(REPO, PR, MARKER, sections)

    assert outcome.status is PostStatus.POSTED
    (body,) = markers_by(github_api, BOT_LOGIN)
    assert body.startswith(MARKER)
    assert len(body) <= COMMENT_BODY_LIMIT
    assert "## cell 5" in body
    assert "## cell 6" not in body
    assert "4 more sections were cut" in body


def test_server_errors_are_retried_with_backoff(github_api: ApiServer) -> None:
    github_api.inject(Fault(FaultKind.SERVER_ERROR, times=2, path="/check-runs$", method="POST"))
    sleeps: list[float] = []

    outcome = reporter(github_api, sleeps).post_check_run(REPO, SHA, "ci-matrix", "success", "ok", "all good", "", [])

    assert outcome.status is PostStatus.POSTED
    assert [r.status for r in github_api.requests_to("POST", "/check-runs")] == [500, 500, 201]
    assert sleeps == [0.01, 0.02]


def test_secondary_rate_limit_waits_for_retry_after(github_api: ApiServer) -> None:
    github_api.inject(Fault(FaultKind.SECONDARY_RATE_LIMIT, path="/comments$", method="POST"))
    settings = ApiSettings(github_api.base_url, DEFAULT_TOKEN, retry=FAST)

    outcome = GitHubReporter(settings, sleep=time.sleep).upsert_sticky_comment(REPO, PR, MARKER, ["report"])

    assert outcome.status is PostStatus.POSTED
    limited, accepted = github_api.requests_to("POST", "/comments")
    assert (limited.status, accepted.status) == (403, 201)
    assert accepted.at - limited.at >= 1.0
    assert len(markers_by(github_api, BOT_LOGIN)) == 1


def test_429_retry_after_is_honoured(github_api: ApiServer) -> None:
    github_api.inject(Fault(FaultKind.SECONDARY_RATE_LIMIT, path="/check-runs$", status=429, retry_after=3))
    sleeps: list[float] = []

    outcome = reporter(github_api, sleeps).post_check_run(REPO, SHA, "ci", "neutral", "t", "s", "", [])

    assert outcome.status is PostStatus.POSTED
    assert sleeps == [3.0]


def test_read_only_token_is_forbidden_and_not_retried(github_api: ApiServer) -> None:
    github_api.add_token("ghs_fork", BOT_LOGIN, read_only=True)
    sleeps: list[float] = []
    post = reporter(github_api, sleeps, token="ghs_fork")

    comment = post.upsert_sticky_comment(REPO, PR, MARKER, ["report"])
    check = post.post_check_run(REPO, SHA, "ci-matrix", "failure", "t", "s", "", failures(3))

    assert (comment.status, check.status) == (PostStatus.FORBIDDEN, PostStatus.FORBIDDEN)
    assert "read-only token" in comment.message
    assert "ghs_fork" not in comment.message + check.message + repr(post)
    assert len(github_api.requests_to("POST")) == 2
    assert sleeps == []


def test_a_hang_ends_in_a_timeout_outcome(github_api: ApiServer) -> None:
    github_api.inject(Fault(FaultKind.HANG, times=5, path="/pulls/"))
    sleeps: list[float] = []
    started = time.monotonic()

    outcome = reporter(github_api, sleeps, read_timeout=0.3).upsert_sticky_comment(REPO, PR, MARKER, ["report"])

    assert outcome.status is PostStatus.TIMED_OUT
    assert "after 3 attempts" in outcome.message
    assert time.monotonic() - started < 3.0
    assert len(github_api.requests_to("GET", f"/pulls/{PR}")) == 3
    assert github_api.store.comments == {}


def test_public_api_root_without_enterprise_suffix(github_api_description: ApiDescription) -> None:
    server = ApiServer(github_api_description, prefix="").start()
    try:
        outcome = reporter(server, []).upsert_sticky_comment(REPO, PR, MARKER, ["report"])
    finally:
        server.stop()
    assert outcome.status is PostStatus.POSTED
    assert server.violations == []


def test_the_server_refuses_what_github_refuses(github_api: ApiServer) -> None:
    url = f"{github_api.base_url}/repos/{REPO}/check-runs"
    headers = {"Authorization": f"token {DEFAULT_TOKEN}"}
    output: dict[str, Any] = {"title": "t", "summary": "s", "annotations": [a.to_json() for a in failures(51)]}
    with requests.Session() as http:
        too_many = http.post(url, json={"name": "x", "head_sha": SHA, "output": output}, headers=headers)
        no_sha = http.post(url, json={"name": "x"}, headers=headers)
        no_token = http.get(f"{github_api.base_url}/repos/{REPO}")

    assert [too_many.status_code, no_sha.status_code, no_token.status_code] == [422, 422, 401]
    assert "output/annotations" in github_api.violations[0]
    assert "head_sha" in github_api.violations[1]
    assert len(github_api.violations) == 3
    github_api.violations.clear()  # seen and asserted: do not fail the test at teardown


def test_a_failed_annotation_batch_is_reported_with_what_was_sent(github_api: ApiServer) -> None:
    github_api.inject(Fault(FaultKind.SERVER_ERROR, times=3, path="/check-runs/", method="PATCH"))

    outcome = reporter(github_api, []).post_check_run(REPO, SHA, "ci", "failure", "t", "s", "", failures(120))

    assert outcome.status is PostStatus.FAILED
    assert outcome.message.startswith("check run created with 50 of 120 annotations")
    assert "HTTP 500" in outcome.message
    assert "/runs/" in outcome.url


def test_the_servers_own_answers_match_githubs_description(github_api: ApiServer) -> None:
    """The stateful endpoints are ours, not GitHub's examples: check their answers too."""
    calls: list[tuple[str, str, Any]] = [
        ("POST", f"/repos/{REPO}/issues/{PR}/comments", {"body": "hi"}),
        ("GET", f"/repos/{REPO}/issues/{PR}/comments", None),
        ("PATCH", f"/repos/{REPO}/issues/comments/1001", {"body": "edited"}),
        ("POST", f"/repos/{REPO}/check-runs", {"name": "ci", "head_sha": SHA, "conclusion": "failure"}),
        (
            "PATCH",
            f"/repos/{REPO}/check-runs/1002",
            {"output": {"summary": "s", "annotations": [a.to_json() for a in failures(2)]}},
        ),
        ("GET", f"/repos/{REPO}/check-runs/1002/annotations", None),
        ("DELETE", f"/repos/{REPO}/issues/comments/1001", None),
    ]
    headers = {"Authorization": f"token {DEFAULT_TOKEN}", "Accept": "application/vnd.github.v3.full+json"}
    with requests.Session() as http:
        for method, path, body in calls:
            answer = http.request(method, github_api.base_url + path, json=body, headers=headers)
            request = MockRequest("https://api.github.com", method, path, data=json.dumps(body).encode())
            response = MockResponse(
                answer.content,
                status_code=answer.status_code,
                headers=dict(answer.headers),
                content_type="application/json",
            )
            github_api.description.openapi.validate_response(request, response)


def test_a_missing_description_is_reported_with_its_path(tmp_path: Path) -> None:
    missing = tmp_path / "api.github.com.json"
    with pytest.raises(SpecNotFound, match=str(missing)):
        locate({ENV_VAR: str(missing)})


def test_sticky_body_keeps_the_head_of_a_first_section_too_big_to_fit() -> None:
    body = sticky_body(MARKER, ["é" * 40_000, "second"])

    assert body.startswith(f"{MARKER}\n\néé")
    assert size(body) <= COMMENT_BODY_LIMIT
    assert body.endswith("the jobs' step summaries have the full report._")
    assert "1 more section was cut" in body


def test_truncate_cuts_between_characters() -> None:
    cut = truncate("€" * 100, 50, note="…")
    assert cut == "€" * 15 + "…"
