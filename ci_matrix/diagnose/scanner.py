"""Find the last occurrence of every known failure signature in a build log.

The log is untrusted input of any size, so the scan is built to stay linear and bounded:

* Signatures run on google-re2 only (no backtracking, linear in the log's size).
* The log is scanned in pieces of ``chunk_size`` bytes. One RE2 ``Set`` pass tells
  which signatures may occur in a piece; only those are then located one by one. A
  clean log therefore costs one pass, and that pass runs on a worker thread (RE2 releases
  the GIL) while the main thread cleans the next piece. The Set mostly looks for each
  signature's longest literal run (:func:`ci_matrix.diagnose.tolerant.set_forms`), a trie
  for its DFA whatever the knowledge base's size, and reads the signatures without one whole,
  in a Set of their own (in one Set the two kinds' DFA states multiply on hostile text);
  where a piece holds the runs of several
  signatures, one Set of their confirm forms (the patterns as a Set reads them whole) says
  which match before any is located. That Set runs on a second worker thread, beside the
  next piece's Set pass and cleaning (hostile text needs it on every piece; a build log
  seldom does).
* Colour codes are the costly part of cleaning (a Python step per escape), so a piece
  dense in them keeps them, and a second Set, of a short part of each signature rewritten
  to step over escape sequences (:mod:`ci_matrix.diagnose.tolerant`), reads it. Only a piece where that
  Set saw something has its escapes removed, and there the signatures themselves decide.
  Pieces with few escapes are stripped at once and read by the plain Set, whose DFA is
  half the size on hostile text.
* Each piece is scanned behind a short tail of the previous one (``OVERLAP_LINES`` lines,
  at most ``OVERLAP_BYTES``), so a multi-line signature that straddles two pieces is still
  found, and counted once: a match counts in the piece where it ends.
* Patterns run in multi-line mode: ``^`` and ``$`` mean the start and end of a line.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, BinaryIO, TypeVar

import re2

from ci_matrix.diagnose.cleaning import ascii_marks, clean_pieces, count_newlines, strip_escapes
from ci_matrix.diagnose.hits import Buffer, Found, Hit, complete_after, found_at, last_match, lines_before
from ci_matrix.diagnose.tolerant import SetForms, set_forms

CHUNK_SIZE = 2 << 20
OVERLAP_LINES = 32  # the most lines one multi-line signature may span across pieces
OVERLAP_BYTES = 64 << 10
# Matches counted one by one per piece; past that, the count is a lower bound (one failure
# repeated a million times must not cost a million Python steps).
COUNT_LIMIT = 100
_PENDING_BUFFERS = 4  # buffers held so that last-only signatures are located once
# Escape-tolerant matches of a last-only signature tried line by line before its whole
# buffer is stripped to decide
_CONFIRM_TRIES = 8
# RE2's budget for a Set's DFA; past it the DFA flushes its states, never fails. With some
# 250 patterns, 16 MiB thrashed on hostile text (a flush every few KB: 4x slower); the
# states are built only as text needs them, so a normal log uses a fraction of it.
_SET_MAX_MEM = 64 << 20
# A Set mostly looks for a literal run of each pattern (see tolerant.set_forms), so a piece may
# hold the runs of several patterns that do not match there. Located one by one, each costs a
# pass over the piece; from this many on, one Set of their confirm forms (tolerant.SetForms)
# first says which of them match at all (hostile text holds the runs of dozens). Such Sets are kept by their
# patterns, a few at a time: the same ones come back piece after piece.
_CONFIRM_FROM = 4
_CONFIRM_SETS = 32

_Regex = Any  # google-re2 ships no type hints
_T = TypeVar("_T")


@dataclass(frozen=True)
class Signature:
    """One pattern of a rule: RE2 syntax, multi-line mode, case-sensitive unless ``(?i)``.

    ``last_only``: only the last match matters, not how often it occurred (evidence such as
    a version banner), so the scan looks back from the end of a piece instead of walking it.
    """

    key: str
    pattern: str
    last_only: bool = False


@dataclass(frozen=True)
class _Compiled:
    key: str
    pattern: str  # the signature's, its typographic marks as ASCII
    last_only: bool = False
    tolerant: str | None = None  # what the Set looks for in text with escapes (None: it cannot)
    plain: str = ""  # what the Set looks for in clean text: the pattern, or its core part
    exact: bool = True  # plain is the pattern itself
    confirm: str = ""  # the pattern as a Set reads it whole (see tolerant.SetForms)

    @functools.cached_property
    def regex(self) -> _Regex:
        """The pattern compiled, when a Set first says it may be in a piece: most signatures
        are never in a log, and RE2 compiles some two thousand in a third of a second."""
        return _regex(self.key, self.pattern)


@dataclass(frozen=True)
class _Carry:
    """What one buffer hands to the next."""

    lead: bytes = b"\n"
    tail: bytes = b""
    first_line: int = 1
    held_back: int = 0  # 1 after a piece cut inside a line: a match ending at the cut waits
    ring: tuple[str, ...] = ()


class Scanner:
    """Signatures compiled once into an RE2 Set, reusable for any number of logs."""

    def __init__(self, signatures: Sequence[Signature], forms: Mapping[str, SetForms] | None = None) -> None:
        """Compile ``signatures``; raise ``ValueError`` naming the key of a bad pattern.

        ``forms``: Set forms worked out before, by pattern (the built-in knowledge base ships
        them: working them out takes Python's regex parser about half a millisecond a
        pattern, most of a diagnosis of a short log); a pattern not in it is worked out here."""
        known = forms or {}
        self._compiled = tuple(_compile(sig, known) for sig in _unique(signatures))
        self._order = {c.key: index for index, c in enumerate(self._compiled)}
        self._set = _split_set([f"(?m){c.plain}" for c in self._compiled], [c.exact for c in self._compiled])
        # Escapes stay in a piece only where every signature can step over them.
        self._lazy = all(c.tolerant is not None for c in self._compiled)
        self._escape_set: Any = None  # compiled when a piece first keeps its escapes

    def _matcher(self, data: bytes) -> Any:
        """The Set that reads ``data``: the escape-tolerant one where it holds an escape."""
        if b"\x1b" not in data:
            return self._set.Match
        if self._escape_set is None:
            self._escape_set = _compile_set([f"(?m){c.tolerant}" for c in self._compiled])
        return self._escape_set.Match

    def scan(self, stream: BinaryIO, *, context: int = 3, chunk_size: int = CHUNK_SIZE) -> dict[str, Hit]:
        """Return the last hit of each signature found in ``stream``, keyed by signature key.

        ``context`` lines before and after each hit are kept; ``chunk_size`` bounds how
        much of the log is held at once (about four times it, whatever the log holds).
        """
        if context < 0:
            raise ValueError("context must not be negative")
        run = _Run(self._compiled, context, self._order)
        overlap = min(OVERLAP_BYTES, chunk_size)
        buffers = _buffers(stream, chunk_size, context, overlap, escapes=not self._lazy)
        ahead, size = [], 0
        for buf in buffers:
            ahead.append(buf)
            size += len(buf.data)
            if size >= chunk_size:
                break
        # Three steps per buffer, each on its own thread where it can run beside the others:
        # the main thread cleans buffer n+1 (in _buffers) and locates in buffer n-1; one
        # worker runs the Set on buffer n; another the confirm Set of buffer n's uncertain
        # hits (a hostile piece has dozens; a build log's pieces need none). A log shorter than
        # a chunk (most build steps' logs; the line end that closes an unfinished last line
        # comes as a buffer of its own) has nothing to overlap: threads would only cost their
        # start, so its steps run where they are submitted.
        pools: tuple[Executor, Executor] = (
            (_Inline(), _Inline())
            if size < chunk_size
            else (
                ThreadPoolExecutor(max_workers=1, thread_name_prefix="ci-matrix-scan"),
                ThreadPoolExecutor(max_workers=1, thread_name_prefix="ci-matrix-confirm"),
            )
        )
        with pools[0] as pool, pools[1] as confirm:
            jobs = ((buf, pool.submit(self._matcher(buf.data), buf.data)) for buf in itertools.chain(ahead, buffers))
            steps = (run.prepare(buf, job.result(), confirm) for (buf, job), _ in _with_last(jobs))
            for step, final in _with_last(steps):
                run.absorb(step, final=final)
        return run.hits()


class _Inline(Executor):
    """Runs each job where it is submitted (a log shorter than a chunk has nothing to overlap)."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as error:  # handed on as the thread pool would hand it on
            future.set_exception(error)
        return future


def _with_last(items: Iterable[_T]) -> Iterator[tuple[_T, bool]]:
    """``items``, each with whether it is the last, handed on one behind: an item comes out
    once the next has been taken, so the work that taking the next starts (its Set pass, its
    confirm Set) runs while the caller uses this one."""
    remaining = iter(items)
    try:
        ahead = next(remaining)
    except StopIteration:
        return
    for item in remaining:
        yield ahead, False
        ahead = item
    yield ahead, True


def _unique(signatures: Sequence[Signature]) -> Sequence[Signature]:
    counts = collections.Counter(sig.key for sig in signatures)
    duplicates = sorted(key for key, count in counts.items() if count > 1)
    if duplicates:
        raise ValueError(f"duplicate signature keys: {', '.join(duplicates)}")
    return signatures


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # errors are raised as ValueError, not printed to stderr
    return options


def _compile(sig: Signature, forms: Mapping[str, SetForms]) -> _Compiled:
    pattern = ascii_marks(sig.pattern)  # the text it reads has its typographic marks as ASCII
    found = forms.get(pattern)
    if found is None:  # forms worked out before vouch for their pattern; this one is checked now
        _regex(sig.key, pattern, sig.pattern)
        found = set_forms(pattern)
    return _Compiled(sig.key, pattern, sig.last_only, found.tolerant, found.plain, found.exact, found.confirm)


def checked_set_forms(signatures: Sequence[Signature]) -> dict[str, SetForms]:
    """Each signature's Set forms by pattern (its typographic marks as ASCII), every pattern
    checked as a scanner checks one it has no forms for: what `knowledge/set-forms.json` holds."""
    compiled = (_compile(sig, {}) for sig in _unique(signatures))
    return {c.pattern: SetForms(c.plain, c.tolerant, c.exact, c.confirm) for c in compiled}


def _regex(key: str, pattern: str, given: str = "") -> _Regex:
    """``pattern`` compiled; ``ValueError`` naming ``key`` and the pattern as ``given`` where
    RE2 rejects it or it matches an empty string."""
    given = given or pattern
    try:
        regex = re2.compile("(?m)" + pattern, _options())
    except re2.error as exc:
        raise ValueError(f"signature {key}: RE2 rejects {given!r}: {_reason(exc)}") from None
    if regex.search(b"") is not None:
        raise ValueError(f"signature {key}: {given!r} matches an empty string")
    return regex


def _reason(exc: Exception) -> str:
    reason = exc.args[0] if exc.args else exc
    return reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)


def _compile_set(patterns: Sequence[str]) -> Any:
    options = _options()
    options.max_mem = _SET_MAX_MEM
    pattern_set = re2.Set.SearchSet(options)
    for pattern in patterns:
        pattern_set.Add(pattern)
    pattern_set.Compile()
    return pattern_set


class _Sets:
    """Several RE2 Sets read as one: ``Match`` gives the indices, among all their patterns, of
    those that match."""

    def __init__(self, groups: Sequence[tuple[tuple[int, ...], Any]]) -> None:
        self._groups = groups

    def Match(self, data: bytes) -> list[int]:  # the name RE2 gives a Set's method
        found: list[int] = []
        for indices, pattern_set in self._groups:
            found += [indices[k] for k in pattern_set.Match(data) or ()]
        return sorted(found)


def _split_set(patterns: Sequence[str], whole: Sequence[bool]) -> _Sets:
    """The Set of a scanner's patterns as two: the literal runs (a trie to RE2's DFA) and the
    patterns read whole (those without a long literal run). In one Set their DFA states
    multiply: on hostile text, with some 1,860 patterns, the states outgrew the Set's memory
    budget and were flushed again and again (8.6 s per 20 MiB, against 1.5 s for the two Sets
    read one after the other, and 0.09 against 0.15 s on a build log)."""
    groups = []
    for want in (False, True):
        indices = tuple(i for i, w in enumerate(whole) if w is want)
        if indices:
            groups.append((indices, _compile_set([patterns[i] for i in indices])))
    return _Sets(groups)


@functools.lru_cache(maxsize=_CONFIRM_SETS)
def _confirm_set(patterns: tuple[str, ...]) -> Any:
    """A Set of confirm forms (each with its ``(?m)``), to tell which of them match a piece."""
    return _compile_set(patterns)


def _buffers(stream: BinaryIO, chunk_size: int, context: int, overlap: int, *, escapes: bool) -> Iterator[Buffer]:
    carry = _Carry()
    for piece in clean_pieces(stream, chunk_size, escapes=escapes):
        if piece:  # a piece of nothing but NUL bytes cleans to nothing
            buf, carry = _next_buffer(carry, piece, context, overlap)
            yield buf


def _next_buffer(carry: _Carry, piece: bytes, context: int, overlap: int) -> tuple[Buffer, _Carry]:
    data = carry.lead + carry.tail + piece
    ends_line = piece.endswith(b"\n")
    newlines = count_newlines(data, 1)
    buf = Buffer(
        data, carry.first_line, len(carry.tail) + 1 - carry.held_back, ends_line, carry.ring, len(carry.tail), newlines
    )
    start = _tail_start(data, overlap)
    ring = carry.ring + tuple(lines_before(data, start, context))
    after = _Carry(
        lead=data[start - 1 : start],
        tail=data[start:],
        first_line=carry.first_line + newlines - data.count(b"\n", start),
        held_back=0 if ends_line else 1,
        ring=ring[-context:] if context else (),
    )
    return buf, after


def _tail_start(data: bytes, overlap: int) -> int:
    """Return where the tail carried to the next buffer starts in ``data``.

    The tail is the last ``OVERLAP_LINES`` whole lines that fit in ``overlap`` bytes; only
    when the last line alone is longer does it start inside that line.
    """
    floor = max(1, len(data) - overlap)
    start, pos = floor, len(data) - 1  # pos: skip the newline that ends the last line
    for _ in range(OVERLAP_LINES):
        newline = data.rfind(b"\n", floor - 1, pos)
        if newline < 0:
            break
        start, pos = newline + 1, newline
    return start


@dataclass(frozen=True)
class _Step:
    """What :meth:`_Run.prepare` hands to :meth:`_Run.absorb` for one buffer."""

    raw: Buffer
    buf: Buffer  # raw, or raw stripped of its escapes
    known: tuple[int, ...]  # indices that may match without asking the confirm Set
    unsure: tuple[int, ...] = ()  # indices the confirm Set is asked about
    confirmed: Future[list[int] | None] | None = None  # its answer: positions in ``unsure``

    def maybe(self) -> list[int]:
        """The indices of the signatures that may match in ``buf``, in order."""
        if self.confirmed is None:
            return list(self.known)
        found = self.confirmed.result() or []
        return sorted([*self.known, *(self.unsure[k] for k in found)])


class _Run:
    """What one scan has found so far.

    Signatures that need only their last match (evidence) are located lazily: each waits
    on the last buffer the Set saw it in, and is located once, when no later buffer can
    hold it, so a fact stated on every line costs one look, not one per piece. At most
    ``_PENDING_BUFFERS`` buffers are held for this; past that the oldest is settled early.
    """

    def __init__(self, compiled: Sequence[_Compiled], context: int, order: Mapping[str, int]) -> None:
        self._compiled = compiled
        self._order = order  # signature key -> its place among the signatures
        self._context = context
        self._counts: dict[str, int] = {}
        self._found: dict[str, Found] = {}
        self._pending: dict[int, tuple[Buffer, bool]] = {}  # last-only index -> its last buffer
        self._tolerant: dict[str, _Regex] = {}  # escape-tolerant forms, compiled when first needed

    def prepare(self, raw: Buffer, indices: Sequence[int] | None, pool: Executor) -> _Step:
        """The first step for one buffer and the indices of the signatures the Set saw in it:
        which of them may match there. Where many are uncertain, one Set of their confirm
        forms says which match, on ``pool``, while the main thread goes on (see :meth:`absorb`).

        Where ``raw`` holds escapes, the escape-tolerant Set read it, whose word may be too
        generous: it is stripped of them, and the signatures themselves decide. Only
        signatures that count every match need the whole buffer stripped; evidence
        (last-only) is confirmed on the few lines where its escape-tolerant form matches, and
        its buffer is stripped when it is finally located, if ever.
        """
        if not indices:
            return _Step(raw, raw, ())
        indices = sorted(indices)
        now = any(not self._compiled[i].last_only for i in indices)
        buf = raw.stripped() if now else raw
        clean = buf is raw and not raw.escaped  # the plain Set read it
        sure = [i for i in indices if clean and self._compiled[i].exact]
        kept = [i for i in indices if not clean and self._compiled[i].last_only and buf.escaped]
        # Evidence (last-only) joins the uncertain ones where ``buf`` holds no escape (its
        # escape-tolerant check is its own).
        unsure = [i for i in indices if not (clean and self._compiled[i].exact) and i not in kept]
        if len(unsure) < _CONFIRM_FROM:
            return _Step(raw, buf, tuple(sorted([*sure, *kept, *unsure])))
        confirm_set = _confirm_set(tuple(f"(?m){self._compiled[i].confirm}" for i in unsure))
        return _Step(raw, buf, tuple(sorted([*sure, *kept])), tuple(unsure), pool.submit(confirm_set.Match, buf.data))

    def absorb(self, step: _Step, *, final: bool) -> None:
        """Take in one buffer, once :meth:`prepare` has said what may match in it."""
        raw, buf = step.raw, step.buf
        for key, found in self._found.items():
            if found.missing_after:
                self._found[key] = complete_after(found, raw, final)
        maybe = step.maybe()
        if not maybe:
            return
        until = buf.end(final)
        for index in maybe:
            sig = self._compiled[index]
            if sig.last_only and self._here(sig, raw, buf, final):
                # It is here: earlier buffers no longer matter.
                self._pending[index] = (buf, final)
        located = (self._locate(self._compiled[i], buf, until) for i in maybe if not self._compiled[i].last_only)
        self._record(buf, [m for m in located if m], final)
        held = {id(pending[0]): pending for pending in self._pending.values()}
        if len(held) > _PENDING_BUFFERS:
            self._settle(next(iter(held.values()))[0])

    def _here(self, sig: _Compiled, raw: Buffer, buf: Buffer, final: bool) -> bool:
        """Whether last-only ``sig`` really matches in ``buf`` (``raw``, or ``raw`` stripped)."""
        if buf is not raw or not raw.escaped:
            # the plain Set's word on an exact pattern is final where the buffer was clean
            return (buf is raw and sig.exact) or sig.regex.search(buf.data, 1, buf.end(final)) is not None
        tolerant = self._tolerant.get(sig.key)
        if tolerant is None:
            tolerant = self._tolerant[sig.key] = re2.compile("(?m)" + str(sig.tolerant), _options())
        data, until = raw.data, raw.end(final)
        for tries, match in enumerate(tolerant.finditer(data, 1)):
            if match.end() > until or tries == _CONFIRM_TRIES:
                break
            # the lines the escape-tolerant match spans, stripped: a match of the signature
            # there is one in the stripped buffer (an escape sequence never holds a newline)
            start = data.rfind(b"\n", 0, match.start()) + 1
            stop = data.find(b"\n", max(match.start(), match.end() - 1))
            stop = len(data) if stop < 0 else stop + 1
            lines = b"\n" + strip_escapes(data[start:stop])
            cut = len(lines) - (stop == len(data) and until < len(data))
            if sig.regex.search(lines, 1, cut) is not None:
                return True
        stripped = raw.stripped()
        return sig.regex.search(stripped.data, 1, stripped.end(final)) is not None

    def _record(self, buf: Buffer, located: list[tuple[_Compiled, Any, int]], final: bool) -> None:
        """Keep the located matches, line numbers counted in one walk over the buffer, in
        the order of the matches (many hits must not each count from the start); a match
        nearer the buffer's end than the last one counts back from the end."""
        line, pos, end = buf.first_line, 1, len(buf.data)
        for sig, match, count in sorted(located, key=lambda item: item[1].start()):
            start = match.start()
            if start - pos <= end - start:
                line = line + buf.data.count(b"\n", pos, start)
            else:
                line = buf.first_line + buf.newlines - buf.data.count(b"\n", start)
            pos = start
            context = 0 if sig.last_only else self._context
            self._counts[sig.key] = self._counts.get(sig.key, 0) + count
            self._found[sig.key] = found_at(sig.key, buf, match, line, context, final)

    def _settle(self, buf: Buffer | None = None) -> None:
        """Locate the last-only signatures waiting on `buf` (None: on every buffer)."""
        groups: dict[int, list[int]] = {}
        for index, (waiting, _) in self._pending.items():
            if buf is None or waiting is buf:
                groups.setdefault(id(waiting), []).append(index)
        for indices in groups.values():
            waiting, final = self._pending[indices[0]]
            waiting = waiting.stripped()  # worked out once per buffer
            until = waiting.end(final)
            located = []
            for index in indices:
                del self._pending[index]
                # The buffer's overlap with the one before counts too: this is the last look.
                last = last_match(self._compiled[index].regex, waiting.data, 1, until)
                if last is not None:
                    located.append((self._compiled[index], last, 1))
            self._record(waiting, located, final)

    def _locate(self, sig: _Compiled, buf: Buffer, until: int) -> tuple[_Compiled, Any, int] | None:
        """The last match of `sig` that ends in this buffer's new part, and how many there were."""
        count, last = 0, None
        for match in sig.regex.finditer(buf.data, 1):
            if match.end() > until:
                break  # it runs into the next piece, which will find it whole
            if match.end() > buf.accept_after:
                count, last = count + 1, match
                if count == COUNT_LIMIT:  # a flood of one failure: skip to its last match
                    last = last_match(sig.regex, buf.data, match.end(), until) or last
                    break
        return (sig, last, count) if last is not None else None

    def hits(self) -> dict[str, Hit]:
        """Return the final hits, in the order of the signatures."""
        self._settle()
        return {
            key: dataclasses.replace(self._found[key].hit, count=self._counts[key])
            for key in sorted(self._found, key=self._order.__getitem__)
        }
