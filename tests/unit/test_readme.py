"""The README documents every environment variable guardtrace reads, with its default."""

from __future__ import annotations

from pathlib import Path

from guardtrace.schemas import environment_variables as env

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_every_variable_is_in_the_configuration_table() -> None:
    for var in env.ALL:
        assert f"| `{var.name}` |" in README, var.name
        default = f"`{var.default}`" if var.default else "(empty)"
        assert f"| `{var.name}` | {default} |" in README, var.name


def test_readme_names_the_two_commands_ci_and_users_run() -> None:
    assert "make demo" in README and "make test" in README
    ci = (Path(__file__).resolve().parents[2] / ".ci" / "run").read_text()
    assert "make test" in ci
