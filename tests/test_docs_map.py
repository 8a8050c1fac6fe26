"""docs/design.md's table of integration points names files that exist, and the tests that prove each point, so a
vendor following it never hits a dead end; every test file is mapped, by integration point or in tests/README.md."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
DESIGN = ROOT / "docs" / "design.md"
TESTS = ROOT / "tests"
TESTS_README = TESTS / "README.md"
TEST_FILE = r"tests/[\w./-]+\.py"


def integration_point_rows():
    """Each row of the table as its four cells: integration point, where PyTorch looks, file, tests."""
    text = DESIGN.read_text()
    table = text.split("## Integration points and their files", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| integration")]
    return [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines]


def test_every_row_has_the_four_columns():
    rows = integration_point_rows()
    assert len(rows) > 20
    assert [row for row in rows if len(row) != 4] == []


def test_every_file_in_the_integration_point_table_exists():
    rows = integration_point_rows()
    named = [path for row in rows for path in re.findall(r"`([\w./-]+\.(?:cpp|h|py|toml)|[\w./-]+/)`", row[2])]
    assert named, rows
    missing = [path for path in named if not (ROOT / path).exists()]
    assert missing == []


def test_every_integration_point_names_existing_tests_or_none():
    rows = integration_point_rows()
    without_tests = [row[0] for row in rows if row[3] != "—" and not re.findall(f"`({TEST_FILE})`", row[3])]
    assert without_tests == []
    missing = [path for row in rows for path in re.findall(f"`({TEST_FILE})`", row[3]) if not (ROOT / path).is_file()]
    assert missing == []


def test_every_test_file_is_mapped_by_integration_point_or_subject():
    in_table = {path for row in integration_point_rows() for path in re.findall(f"`({TEST_FILE})`", row[3])}
    in_readme = set(re.findall(r"\b(test_\w+\.py)\b", TESTS_README.read_text()))
    assert [name for name in in_readme if not (TESTS / name).is_file()] == []
    test_files = sorted(TESTS.glob("test_*.py"))
    assert test_files
    unmapped = [path.name for path in test_files if f"tests/{path.name}" not in in_table and path.name not in in_readme]
    assert unmapped == []
