"""The README's command-line quick start, run as written: every command of its block, in
order, in a fresh folder, each a real process (the dev server, the authority worker and the
README's own agent included), ending with the Mission approved.

Only two things differ from a person's shell: `MWP_ADDRESS` and the `MWP_*_PORT` variables
point every command at free ports (so a developer's own `mwp dev` is left alone), and the
placeholders are filled in with the IDs the commands before printed.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mwp.dev.stack import free_port

REPO = Path(__file__).resolve().parents[2]
SECTION = "## A Mission from the command line"
# A background command is ready once it prints this.
READY = {"dev": "Ready in", "agent": "Task queue", "coordinator": "Gateway "}


def quick_start(heading: str = SECTION) -> list[str]:
    """The command lines of the section's first ``sh`` block, comments removed."""
    text = (REPO / "README.md").read_text()
    section = text[text.index(heading) :]
    block = section[section.index("```sh\n") + 6 : section.index("\n```", section.index("```sh"))]
    return [line for line in block.splitlines() if line.strip()]


@dataclass
class Shell:
    """Runs the README's lines as a person would, remembering the IDs they print."""

    cwd: Path
    env: dict[str, str]
    ids: dict[str, str] = field(default_factory=dict)
    background: list[tuple[subprocess.Popen[bytes], Path]] = field(default_factory=list)
    transcript: list[str] = field(default_factory=list)

    def run(self, line: str) -> str:
        words = shlex.split(line, comments=True)
        detached = words[-1] == "&"
        words = [self._fill(w) for w in (words[:-1] if detached else words)]
        self.transcript.append(f"$ {shlex.join(words)}{' &' if detached else ''}")
        if detached:
            return self._start(words)
        done = subprocess.run(
            words, cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=180
        )
        self.transcript.append(done.stdout + done.stderr)
        assert done.returncode == 0, "\n".join(self.transcript)
        self._remember(done.stdout)
        return done.stdout

    def _fill(self, word: str) -> str:
        for name, value in self.ids.items():
            word = word.replace(f"<{name}>", value)
        assert "<" not in word, f"no value for a placeholder in {word!r}: {self.ids}"
        return word

    def _remember(self, out: str) -> None:
        for name, pattern in (
            ("mission", r"^Mission\s+(urn:\S+)"),
            ("item", r"^WorkItem\s+(urn:\S+)"),
            ("hash", r"^\s*Artifact\s+(sha256:[0-9a-f]{64})"),
        ):
            found = re.search(pattern, out, re.MULTILINE)
            if found and name not in self.ids:
                self.ids[name] = found.group(1)

    def _start(self, words: list[str]) -> str:
        log = self.cwd / f"{words[1]}-{len(self.background)}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                words, cwd=self.cwd, env=self.env, stdout=out, stderr=subprocess.STDOUT
            )
        self.background.append((process, log))
        wait_for(log, READY[words[1]], process)
        return log.read_text()

    def stop_all(self) -> None:
        for process, _ in reversed(self.background):  # only the processes this test started
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def wait_for(log: Path, text: str, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text():
        assert process.poll() is None, f"exited {process.returncode}:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"no {text!r} in {timeout} s:\n{log.read_text()}"
        time.sleep(0.2)


@pytest.fixture
def shell(tmp_path: Path) -> Iterator[Shell]:
    (tmp_path / "examples").symlink_to(REPO / "examples")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MWP_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["MWP_ADDRESS"] = f"127.0.0.1:{free_port()}"
    env["MWP_UI_PORT"] = str(free_port())
    env["MWP_GATEWAY_PORT"] = str(free_port())
    env["MWP_ARTIFACT_PORT"] = str(free_port())
    env["MWP_CONSOLE_PORT"] = str(free_port())
    env["MWP_PROTOCOL_ROOT"] = os.environ.get("MWP_PROTOCOL_ROOT", "")
    runner = Shell(tmp_path, env)
    try:
        yield runner
    finally:
        runner.stop_all()


def test_the_quick_start_ends_with_the_mission_approved_by_the_readme_agent(shell: Shell) -> None:
    lines = quick_start()
    assert lines[0].startswith("mwp dev &") and lines[-1].startswith("mwp mission approve")
    outputs = [shell.run(line) for line in lines]

    assert "mission.approved" in outputs[-1]
    shown = shell.run("mwp mission show <mission>")
    assert "(approved," in shown
    # The Artifact the README's agent wrote, read back through its content hash.
    artifact = outputs[next(i for i, line in enumerate(lines) if "mission artifact" in line)]
    assert artifact == "Why Write the report\nHow Write the report"
    agent_log = shell.background[1][1].read_text()
    assert re.search(r"writer: work item \w{8} of mission \w{8} submitted", agent_log)
    assert "Traceback" not in agent_log


def test_the_readme_agent_says_why_it_declines_and_a_second_runtime_refuses_to_start(
    shell: Shell,
) -> None:
    """The quick start's stack and agent, then the mistakes its text warns about."""
    lines = quick_start()
    for line in lines[: next(i for i, t in enumerate(lines) if "mwp agent run" in t) + 1]:
        shell.run(line)
    agent, agent_log = shell.background[1]

    # A second runtime of the running agent refuses, naming the running worker.
    second = subprocess.run(
        ["mwp", "agent", "run", "examples.writer:agent"],
        cwd=shell.cwd, env=shell.env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert second.returncode == 1, second.stdout + second.stderr
    assert "urn:mwp:agent:writer is already running" in second.stderr
    assert "--replace" in second.stderr and "Traceback" not in second.stderr

    # The runtime serves the card the Registry holds (`mwp registry add-agent` made v1), read
    # through the gateway; an offer pinned at another version (a card registered since, that
    # this runtime does not run) is declined. The writer is new to the Group: the offer
    # carries its signed Context Package.
    assert "Agent Card version 1" in agent_log.read_text()
    shell.run('mwp mission create --owner ada --coordinator planner --objective "Ship it"')
    shell.run('mwp mission authorize <mission> --as planner --goal "Write the notes"')
    offered = shell.run(
        "mwp mission offer <mission> <item> --as planner --to writer --card-version 2"
    )
    assert "(Agent Card v2)" in offered and "context_package_published" in offered
    short = shell.ids["item"].rsplit(":", 1)[-1][:8]
    wait_for(agent_log, f"writer: declined work item {short}", agent)
    assert "the offer pins Agent Card v2; this runtime serves v1" in agent_log.read_text()

    # --replace takes over: the running one sees its Session replaced, says so, and stops.
    shell.run("mwp agent run examples.writer:agent --replace &")
    assert agent.wait(timeout=30) == 3
    text = agent_log.read_text()
    assert "was replaced by epoch" in text and "agent worker stopped: Session Epoch" in text
    assert "Traceback" not in text
