"""The runnable examples of README.md and docs/: fenced blocks whose info string holds `runnable`.

    ```sh runnable expect="completed"         a shell script (bash), run in a fresh clone
    ```python runnable                        a Python program, run in an empty folder
    ```python runnable pytest                 a test file, run by pytest in an empty folder
    ```json runnable POST /v1/events          a body posted to the path with the admin key

Every `expect="..."` must appear in what the example prints. In a shell example, a line that
starts the service in the background (`make run &`) is left out: the runner has started it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```([A-Za-z]+)([^\n]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
STARTS_THE_SERVICE = re.compile(r"^\s*make run\b.*&")


@dataclass(frozen=True)
class Example:
    path: str
    line: int
    language: str
    body: str
    options: tuple[str, ...] = ()
    expect: tuple[str, ...] = field(default=())

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"

    def shell_script(self) -> str:
        lines = [line for line in self.body.splitlines() if not STARTS_THE_SERVICE.match(line)]
        return "set -eo pipefail\n" + "\n".join(lines) + "\n"


def documents(root: Path = REPO) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def runnable_examples(root: Path = REPO) -> list[Example]:
    found = []
    for document in documents(root):
        text = document.read_text()
        for match in FENCE.finditer(text):
            language, info, body = match.groups()
            words = shlex.split(info)
            if "runnable" not in words:
                continue
            expect = tuple(word.split("=", 1)[1] for word in words if word.startswith("expect="))
            options = tuple(word for word in words if word != "runnable" and not word.startswith("expect="))
            found.append(
                Example(
                    path=str(document.relative_to(root)),
                    line=text.count("\n", 0, match.start()) + 1,
                    language=language,
                    body=body,
                    options=options,
                    expect=expect,
                )
            )
    return found
