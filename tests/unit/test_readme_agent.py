"""The README's agent is ``examples/writer.py`` verbatim and under 30 lines (issue 5); its
Coordinator is ``examples/planner.py`` verbatim."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_shows_examples_writer_verbatim_in_under_30_lines() -> None:
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"## An agent\n.*?```python\n(.*?)```", readme, re.S)
    assert match is not None, "the README has no '## An agent' section with a Python block"
    example = (ROOT / "examples" / "writer.py").read_text()
    assert match.group(1) == example
    assert len(example.splitlines()) < 30


def test_the_readme_shows_examples_planner_verbatim() -> None:
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"## A Coordinator\n.*?```python\n(.*?)```", readme, re.S)
    assert match is not None, "the README has no '## A Coordinator' section with a Python block"
    assert match.group(1) == (ROOT / "examples" / "planner.py").read_text()
