"""The README's reliability section names tests that exist, and every failure of the reliability reviews has a safety
test that names its id: issue 24 (``../shared/notes/review-reliability.md``, section 2) and issue 32 (the third round,
``../shared/notes/review-reliability-3.md``, whose ids are looked up in ``tests/apps/test_safety_r3_*.py`` only: an
id such as R03 means another failure in each review; tests/README.md)."""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: the 70 failures of the review (section 2: data lost, tracebacks, silently wrong, hangs, other)
REVIEW_IDS = """PT05 PT04 PT07 PT03 UF01 UF02 O17 O15
B15 NT04 NT07 NT10 RC04 RC05 DF01 DF02 MD03 MD14 MD08 MD13 E03 E05 E06
RC03 MD10 MD12 PT01 MD04 MD17 E04 T11 T12 T08 N12 N14 N05 R05 R06 PT06 RP04 O04 O07 O08 L24 L26 L30 L31 L32 L41 L48
T21 NT16 NT15
R04 R03 RP06 NT02 NT03 NT13 NT14 MD09 B11 B18 O14 RP03 E14 E16 E12 L34 L37""".split()


#: the 68 failures of the third review (issue 32): data lost, tracebacks, silently wrong, other
REVIEW3_IDS = """OP17 OP18 OP19 OP24c TL04 TL20 BM01
ET12 OP07 MF06 MF06b MF06c ST02 TL05 TL06 BM02 BM05 BM07 BM08 BM09
TC04 TC05 J02 LR01 LR06 OP01 IN01 IN01b A07 R01 R03 R07 R10 P01 P02 P06 H01 H02 H04 C02 K01
TC10 DT01 ET13 MX01 MX03 O07b OP23 OP24b OP05b IR03 IN07 ST01 TL10 TL13 TL14 TL22 A03 R05 R06 P04 H03 C01 C03 C04 C07
C11 D01""".split()


#: the 34 ids of the fourth review (issue 43), covering its 56 failures: R4-01 to R4-31, R4-S1 to R4-S3
REVIEW4_IDS = [f"R4-{k:02d}" for k in range(1, 32)] + ["R4-07b"] + [f"R4-S{k}" for k in range(1, 4)]


def _tests(path: Path) -> dict:
    """test function name -> its name and docstring."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name: n.name + " " + (ast.get_docstring(n) or "") for n in tree.body
            if isinstance(n, ast.FunctionDef) and n.name.startswith("test")}


def test_every_review_failure_has_a_test_that_names_it():
    assert len(REVIEW_IDS) == len(set(REVIEW_IDS)) == 70
    texts = " ".join(t for f in sorted((ROOT / "tests" / "apps").glob("test_safety_*.py")) for t in _tests(f).values())
    missing = [i for i in REVIEW_IDS if not re.search(rf"(?<![A-Z0-9]){i}(?![0-9])", texts)]
    assert not missing, missing


def test_every_third_review_failure_has_a_test_that_names_it():
    assert len(REVIEW3_IDS) == len(set(REVIEW3_IDS)) == 68
    files = sorted((ROOT / "tests" / "apps").glob("test_safety_r3_*.py"))
    texts = " ".join(t for f in files for t in _tests(f).values())
    missing = [i for i in REVIEW3_IDS if not re.search(rf"(?<![A-Za-z0-9]){i}(?![0-9a-z])", texts)]
    assert not missing, missing
    assert (ROOT / "tests" / "README.md").is_file()  # what an id means and where the reviews come from


def test_every_fourth_review_failure_has_a_test_that_names_it():
    """A test's name (R4_05) or docstring (R4-05) carries the id; tests/apps/test_safety_r4_*.py only."""
    files = sorted((ROOT / "tests" / "apps").glob("test_safety_r4_*.py"))
    texts = " ".join(t for f in files for t in _tests(f).values())
    missing = [i for i in REVIEW4_IDS if not re.search(rf"(?<![A-Za-z0-9]){i.replace('-', '[-_]')}(?![0-9a-z])", texts)]
    assert not missing, missing


def test_every_test_the_reliability_section_names_exists():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Reliability", 1)[1].split("\n### ", 1)[0]
    named, current = [], None
    for m in re.finditer(r"`((?:tests/[\w/]+/)?test_\w+\.py)?::(test_\w+)`", section):
        current = m.group(1) or current
        named.append((current, m.group(2)))
    assert len(named) >= 40
    for file, name in named:
        path = ROOT / file if file.startswith("tests/") else ROOT / "tests" / "apps" / file
        assert name in _tests(path), (file, name)
