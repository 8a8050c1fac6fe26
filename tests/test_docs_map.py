"""docs/design.md's table of integration points names files that exist, so a vendor following it never hits a
dead end."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
DESIGN = ROOT / "docs" / "design.md"


def integration_point_rows():
    text = DESIGN.read_text()
    table = text.split("## Integration points and their files", 1)[1].split("\n## ", 1)[0]
    return [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| integration")]


def test_every_file_in_the_integration_point_table_exists():
    rows = integration_point_rows()
    assert len(rows) > 20
    named = [path for row in rows for path in re.findall(r"`([\w./-]+\.(?:cpp|h|py|toml)|[\w./-]+/)`", row.split("|")[3])]
    assert named, rows
    missing = [path for path in named if not (ROOT / path).exists()]
    assert missing == []
