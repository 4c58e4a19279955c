"""The ```python blocks of README.md's "## Python" section run as written.

They run in order as one program, in a scratch directory, against a daemon
of this test's own (the examples assume an empty store), reached through
WEIGHTD_ADDRESS as a reader of the README would.
"""

import os
import subprocess
import sys

from conftest import SOURCE_DIR


def python_blocks(markdown: str, section: str) -> list:
    """The ```python blocks between `section` and the next "## " heading."""
    blocks, block, inside = [], None, False
    for line in markdown.splitlines():
        if line.startswith("## "):
            inside = line.strip() == section
        elif inside and block is None and line.strip() == "```python":
            block = []
        elif block is not None and line.strip() == "```":
            blocks.append("\n".join(block))
            block = None
        elif block is not None:
            block.append(line)
    return blocks


def test_the_readme_python_examples_run(fresh_daemon, tmp_path):
    blocks = python_blocks((SOURCE_DIR / "README.md").read_text(), "## Python")
    assert len(blocks) >= 3, "the README's ## Python section lost its examples"
    env = dict(os.environ, WEIGHTD_ADDRESS=fresh_daemon.address)
    result = subprocess.run([sys.executable, "-c", "\n\n".join(blocks)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "default/tiny-model@main#1 READY" in out
    assert "['config.json', 'model.safetensors']" in out
    assert "COMPLETED" in out and "NOT_FOUND" in out and "BUSY" in out
    assert (tmp_path / "tiny-copy" / "model.safetensors").read_bytes() == \
        (tmp_path / "tiny-model" / "model.safetensors").read_bytes()
