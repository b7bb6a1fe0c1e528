"""GSM8K problems for the personal-agent experiment (the paper's lazy student; docs in ``data/gsm8k/CARD.md``).

The kit does not ship GSM8K's texts: no package on PyPI carries its test set (``aviary-gsm8k``, ``lm-eval``,
``opencompass``, ``deepeval``, ``evals``, ``promptbench`` and ``reasoning-gym`` were inspected: each downloads it
at run time or ships other data), and this project commits no file it fetched from another repository. What it
ships is the **split definition** ``data/gsm8k/split.json``: for every problem it uses, its line in GSM8K's
``grade_school_math/data/test.jsonl`` (0-based) and the first 16 hex digits of the SHA-256 of its question text.
The user brings the file (MIT licence; openai/grade-school-math), passed as ``path`` or in the environment variable
``CLAW_GSM8K``; :func:`load_split` finds each problem **by its hash**, so the file's order does not matter (upstream's
shuffled ``GSM8K.json`` array with ``ground_truth_answer`` fields works as well as ``test.jsonl``).

Correctness, as the issue defines it: the gold answer is the reply's **final number** (:func:`final_number`,
:func:`is_correct`).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from ..config import GSM8K_SPLITS

__all__ = ["Problem", "GSM8KNotAvailableError", "SPLIT_FILE", "ENV_VAR", "question_hash", "read_gsm8k",
           "load_definition", "load_split", "make_definition", "check_splits", "final_number", "parse_number",
           "is_correct"]

#: the kit's split definition (indices and hashes, no texts)
SPLIT_FILE = Path(__file__).resolve().parents[2] / "data" / "gsm8k" / "split.json"
#: where a user's GSM8K file is looked for when no path is given
ENV_VAR = "CLAW_GSM8K"
#: hex digits of a question's SHA-256 kept in the split definition (64 bits: no collision among 1,319 problems)
HASH_CHARS = 16


class GSM8KNotAvailableError(ValueError):
    """GSM8K's file is not on this machine (or is not GSM8K): one line that says where to get it."""


@dataclass(frozen=True)
class Problem:
    """One GSM8K problem. index: its line in ``test.jsonl`` (0-based); question: the text; gold: the final answer
    as GSM8K writes it after ``#### `` ("65,960"); solution: GSM8K's worked solution ("" where the file has none)."""

    index: int
    question: str
    gold: str
    solution: str = ""

    @property
    def gold_value(self) -> float:
        """The gold answer as a number (commas dropped)."""
        value = parse_number(self.gold)
        if value is None:
            raise ValueError(f"GSM8K problem {self.index}: gold answer {self.gold!r} is not a number")
        return value


def question_hash(question: str) -> str:
    """The first :data:`HASH_CHARS` hex digits of the SHA-256 of the question's UTF-8 text, surrounding whitespace
    dropped (the problem's identity in ``split.json``)."""
    return hashlib.sha256(question.strip().encode("utf-8")).hexdigest()[:HASH_CHARS]


def _record(obj, where: str) -> Tuple[str, str, str]:
    """(question, gold, solution) of one record: GSM8K's ``{"question", "answer": "...#### 42"}`` or upstream's
    ``{"question", "ground_truth_answer": "42"}``."""
    if not isinstance(obj, dict) or not isinstance(obj.get("question"), str):
        raise GSM8KNotAvailableError(f"{where} is not a GSM8K record (no \"question\" text)")
    if isinstance(obj.get("ground_truth_answer"), (str, int, float)):
        return obj["question"], str(obj["ground_truth_answer"]).strip(), str(obj.get("answer", ""))
    answer = obj.get("answer")
    if not isinstance(answer, str) or "####" not in answer:
        raise GSM8KNotAvailableError(f"{where} is not a GSM8K record (its \"answer\" has no '#### ' final answer)")
    return obj["question"], answer.rsplit("####", 1)[1].strip(), answer


def _resolve(path) -> Path:
    if path is None or str(path).strip() == "":
        path = os.environ.get(ENV_VAR, "").strip()
        if not path:
            raise GSM8KNotAvailableError(
                "GSM8K is not shipped with claw-kit: get grade_school_math/data/test.jsonl from "
                f"openai/grade-school-math (MIT) and pass its path (or set {ENV_VAR})")
    p = Path(path).expanduser()
    if not p.is_file():
        what = "is a folder" if p.is_dir() else "does not exist"
        raise GSM8KNotAvailableError(f"GSM8K file {p} {what}; pass the path of GSM8K's test.jsonl "
                                     f"(openai/grade-school-math, MIT)")
    return p


def read_gsm8k(path=None) -> List[Tuple[str, str, str]]:
    """Every record of a GSM8K file as (question, gold, solution), in the file's order: JSON lines (``test.jsonl``)
    or one JSON array (upstream's ``GSM8K.json``). ``path`` None: the environment variable ``CLAW_GSM8K``.
    Raises :class:`GSM8KNotAvailableError` (one line) for a missing file or one that is not GSM8K."""
    p = _resolve(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise GSM8KNotAvailableError(f"{p} is not UTF-8 text; is it GSM8K's test.jsonl?") from None
    if text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as e:
            raise GSM8KNotAvailableError(f"{p} is not valid JSON ({e.msg} at line {e.lineno})") from None
        return [_record(r, f"{p} item {i}") for i, r in enumerate(rows)]
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                out.append(_record(json.loads(line), f"{p} line {n}"))
            except json.JSONDecodeError:
                raise GSM8KNotAvailableError(f"{p} line {n} is not JSON; is it GSM8K's test.jsonl?") from None
    return out


def load_definition(path=SPLIT_FILE) -> dict:
    """The split definition (``data/gsm8k/split.json``): ``{"source": ..., "splits": {name: [[index, hash], ...]}}``."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def load_split(split: str, path=None, definition: Optional[dict] = None) -> List[Problem]:
    """The problems of ``split`` (:data:`claw_lib.config.GSM8K_SPLITS`), in the split's order, read from the user's
    GSM8K file (``path``; None: ``$CLAW_GSM8K``) and matched by question hash. ``definition``: another split
    definition (tests use one made by :func:`make_definition`); default the kit's."""
    definition = load_definition() if definition is None else definition
    known = tuple(definition["splits"])
    if split not in known:
        raise ValueError(f"split must be one of {known}, got {split!r}")
    by_hash: Dict[str, Tuple[str, str, str]] = {question_hash(q): (q, g, s) for q, g, s in read_gsm8k(path)}
    wanted = definition["splits"][split]
    missing = [i for i, h in wanted if h not in by_hash]
    if missing:
        raise GSM8KNotAvailableError(
            f"{len(missing)} of the {len(wanted)} problems of split {split!r} are not in the GSM8K file "
            f"(test.jsonl lines {missing[:3]}...); pass GSM8K's test.jsonl (openai/grade-school-math)")
    return [Problem(i, *by_hash[h]) for i, h in wanted]


def make_definition(records: Sequence[Tuple[str, str, str]], splits: Dict[str, Iterable[int]], source: dict) -> dict:
    """A split definition: for each split name, its problems' ``[index, question hash]`` (index: the record's
    position in ``records``, GSM8K's test.jsonl order). Refuses hashes that collide; :func:`check_splits` checks
    the splits themselves."""
    hashes = [question_hash(q) for q, _, _ in records]
    if len(set(hashes)) != len(hashes):
        raise ValueError("two questions share a hash prefix; raise HASH_CHARS")
    out = {name: [[int(i), hashes[i]] for i in idx] for name, idx in splits.items()}
    return {"source": source, "hash": f"sha256 of the question text (UTF-8, whitespace stripped), first {HASH_CHARS} "
                                      "hex digits", "splits": out}


# --------------------------------------------------------------------------- correctness
#: a number as replies write it: "1,596", "-3", "0.25", "$1,596.00" (the sign only where no digit or ")" precedes)
_NUMBER = re.compile(r"(?<![\d.])(?:(?<![\w)])-)?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


def parse_number(text: str) -> Optional[float]:
    """The value of one number as GSM8K writes its gold answers ("65,960", "-3", "0.5"); None if it is not one."""
    m = _NUMBER.fullmatch((text or "").strip())
    return float(m.group(0).replace(",", "")) if m else None


def final_number(reply: str) -> Optional[float]:
    """The last number a reply writes (digits, with thousands commas and decimals; "2/3" reads as its last part,
    3; numbers in words are not read), None if it writes none. The issue's correctness rule reads this."""
    found = _NUMBER.findall(reply or "")
    return float(found[-1].replace(",", "")) if found else None


def is_correct(reply: str, gold: str) -> bool:
    """Is the reply's final number the gold answer (within 1e-6)?"""
    got, want = final_number(reply), parse_number(gold)
    return got is not None and want is not None and abs(got - want) < 1e-6


def check_splits(definition: dict) -> None:
    """Refuse a definition whose splits are not :data:`GSM8K_SPLITS`, whose dev or held-out problems overlap each
    other or the 72-session stream, or whose 36-session stream is not the 72-session stream's start."""
    s = {k: [i for i, _ in v] for k, v in definition["splits"].items()}
    if tuple(s) != GSM8K_SPLITS:
        raise ValueError(f"splits must be {GSM8K_SPLITS}, got {tuple(s)}")
    if s["stream_72"][:len(s["stream"])] != s["stream"]:
        raise ValueError("the 36-session stream must be the start of the 72-session stream")
    parts = [set(s["stream_72"]), set(s["dev"]), set(s["heldout"])]
    if sum(map(len, parts)) != len(set().union(*parts)):
        raise ValueError("the stream, dev and held-out problems must be disjoint")
