"""All GitHub Actions workflow output in one place: annotations, groups, outputs, summaries.

Text that came from a build log is untrusted: it is escaped so that it can never start a
workflow command, and annotations stay within GitHub's per-step budget.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ci_matrix.errors import CiMatrixError, ConfigError

MAX_PER_LEVEL = 10  # GitHub shows at most 10 annotations of each level per step
MAX_MESSAGE = 4096  # and cuts messages at 4,096 characters
MAX_SUMMARY_BYTES = 1024 * 1024  # a step summary is at most 1 MiB


def escape_data(text: str) -> str:
    """Escape a workflow command's message: `%`, CR and LF."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a workflow command's property value: as a message, plus `:` and `,`."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


@dataclass(frozen=True)
class Annotation:
    """One annotation: level is `error`, `warning` or `notice`."""

    level: str
    message: str
    title: str = ""
    file: str = ""
    line: int = 0
    end_line: int = 0


def command(annotation: Annotation) -> str:
    """The `::error file=..,line=..,title=..::message` line of an annotation."""
    props = []
    if annotation.file:
        props.append(f"file={escape_property(annotation.file)}")
    if annotation.line:
        props.append(f"line={annotation.line}")
        if annotation.end_line:
            props.append(f"endLine={annotation.end_line}")
    if annotation.title:
        props.append(f"title={escape_property(annotation.title)}")
    message = annotation.message[:MAX_MESSAGE]
    head = f"::{annotation.level} {','.join(props)}" if props else f"::{annotation.level}"
    return f"{head}::{escape_data(message)}"


def budgeted(annotations: Sequence[Annotation]) -> Iterator[str]:
    """Annotation lines within GitHub's per-step budget, most important first: what does not
    fit is counted in one closing notice instead of being dropped silently."""
    shown: dict[str, int] = {}
    left_out = 0
    for annotation in annotations:
        if shown.get(annotation.level, 0) >= MAX_PER_LEVEL - (annotation.level == "notice"):
            left_out += 1
            continue
        shown[annotation.level] = shown.get(annotation.level, 0) + 1
        yield command(annotation)
    if left_out:
        yield command(
            Annotation(
                "notice",
                f"{left_out} more findings are in the step summary and the diagnosis file",
                title="ci-matrix: more findings",
            )
        )


def error_annotation(exc: CiMatrixError) -> list[str]:
    """`::error` lines for a failure of ci-matrix itself (one per located problem)."""
    if isinstance(exc, ConfigError):
        items = [
            Annotation("error", p.message, "ci-matrix: invalid configuration", p.file, p.line) for p in exc.problems
        ]
        return list(budgeted(items))
    return [command(Annotation("error", str(exc), "ci-matrix"))]


def stop_token() -> str:
    """A fresh, unguessable token for `::stop-commands::`."""
    return secrets.token_hex(16)


def stop_commands(lines: Iterable[str]) -> Iterator[str]:
    """Echo untrusted text with workflow commands switched off around it."""
    token = stop_token()
    yield f"::stop-commands::{token}"
    yield from lines
    yield f"::{token}::"


def output_block(name: str, value: str) -> str:
    """A `$GITHUB_OUTPUT` entry; the delimiter is random and absent from the value."""
    while True:
        delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
        if delimiter not in value:
            return f"{name}<<{delimiter}\n{value}\n{delimiter}\n"


def outputs_text(values: Mapping[str, str]) -> str:
    """Several `$GITHUB_OUTPUT` entries."""
    return "".join(output_block(k, v) for k, v in values.items())


def env_text(values: Mapping[str, str]) -> str:
    """`$GITHUB_ENV` entries (multi-line safe), for a matrix env that a job cannot merge."""
    return outputs_text(values)


def fit_summary(markdown: str) -> str:
    """Cut a step summary to GitHub's 1 MiB limit, saying so."""
    data = markdown.encode("utf-8")
    if len(data) <= MAX_SUMMARY_BYTES:
        return markdown
    note = "\n\n… (cut: GitHub shows at most 1 MiB of step summary; the rest is in the diagnosis file)\n"
    room = MAX_SUMMARY_BYTES - len(note.encode("utf-8"))
    return data[:room].decode("utf-8", errors="ignore") + note


def append_file(path: str | None, text: str, err: TextIO) -> None:
    """Append to a runner file ($GITHUB_OUTPUT, $GITHUB_STEP_SUMMARY, ...). A failure is
    reported on `err` and never raised: it must not change a build's exit code."""
    if not path:
        return
    try:
        with Path(path).open("a", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        err.write(f"ci-matrix: warning: cannot write {path}: {exc}\n")
