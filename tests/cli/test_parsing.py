"""Argument parsing, settings and error messages, without a database (in-process, fast)."""

from __future__ import annotations

from pathlib import Path

import pytest
from jobs_cli.commands.jobs import parse_instant, parse_job_id, parse_payload, parse_statuses
from jobs_cli.errors import EXIT_UNAVAILABLE, UsageError, redact_url, translate
from jobs_cli.main import main
from jobs_cli.settings import CliSettings, SettingsError, default_data_dir
from jobs_core import ACTIVE, FINISHED, JobNotFound, PayloadInvalid, Status, StoreUnavailable


def test_payload_must_be_a_json_object() -> None:
    assert parse_payload('{"seconds": 1}') == {"seconds": 1}
    with pytest.raises(UsageError, match="not valid JSON"):
        parse_payload("{seconds: 1}")
    with pytest.raises(UsageError, match="must be a JSON object, got list"):
        parse_payload("[1, 2]")


def test_instants_and_ids() -> None:
    assert parse_instant("2026-01-31T18:30:00+01:00").utcoffset() is not None
    assert parse_instant("2026-01-31T18:30:00").tzinfo is not None  # local time
    with pytest.raises(UsageError, match="ISO 8601"):
        parse_instant("tomorrow")
    with pytest.raises(UsageError, match="not a job id"):
        parse_job_id("42")


def test_status_filter() -> None:
    assert parse_statuses("active") == ACTIVE
    assert parse_statuses("finished") == FINISHED
    assert parse_statuses("Done") == frozenset({Status.DONE})
    assert parse_statuses(None) is None
    with pytest.raises(UsageError, match="queued, running"):
        parse_statuses("sleeping")


def test_settings_from_environment(tmp_path: Path) -> None:
    embedded = CliSettings.from_env({"JOBS_DATA_DIR": str(tmp_path)})
    assert embedded.database_url is None
    assert embedded.data_dir == tmp_path.resolve()
    assert embedded.demo_types is True  # the embedded server is a development database
    real = CliSettings.from_env({"JOBS_DATABASE_URL": "postgresql://h/db"})
    assert real.database_url == "postgresql://h/db"
    assert real.demo_types is False
    forced = CliSettings.from_env(
        {"JOBS_DATABASE_URL": "postgresql://h/db", "JOBS_DEMO_TYPES": "1"}
    )
    assert forced.demo_types is True
    off = CliSettings.from_env({"JOBS_DEMO_TYPES": "off"})
    assert off.demo_types is False
    with pytest.raises(SettingsError, match="JOBS_DEMO_TYPES"):
        CliSettings.from_env({"JOBS_DEMO_TYPES": "maybe"})


def test_default_data_dir_is_under_the_project(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.uv.workspace]\nmembers = []\n")
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    assert default_data_dir(nested) == tmp_path.resolve() / ".data"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert default_data_dir(outside) == tmp_path.resolve() / ".data"


def test_password_is_redacted() -> None:
    assert redact_url("postgresql://u:s3cret@h:5/db") == "postgresql://u:***@h:5/db"
    assert redact_url("postgresql://u@h/db") == "postgresql://u@h/db"


def test_domain_errors_become_one_line_messages() -> None:
    not_found = translate(JobNotFound(), "db")
    assert not_found is not None
    assert not_found.exit_code == 1
    assert "no such job" in not_found.message
    invalid = translate(PayloadInvalid([{"msg": "seconds must be a number"}]), "db")
    assert invalid is not None
    assert "seconds must be a number" in invalid.message
    down = translate(StoreUnavailable("connection lost"), "postgresql://h/db")
    assert down is not None
    assert down.exit_code == EXIT_UNAVAILABLE
    assert "postgresql://h/db" in down.message
    assert translate(ZeroDivisionError("bug"), "db") is None


def test_every_subcommand_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    commands = [
        ["migrate"], ["api"], ["worker"], ["dev"], ["token"], ["token", "create"],
        ["token", "revoke"], ["enqueue"], ["ls"], ["show"], ["cancel"], ["retry"],
    ]  # fmt: skip
    for command in commands:
        assert main([*command, "--help"]) == 0, command
        out = capsys.readouterr().out
        assert out.startswith("usage: jobs"), command
        # every option of the command is documented
        assert "--debug" in out, command


def test_usage_errors_are_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["enqueue", "sleep"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--org" in err
    assert main(["enqueue", "sleep", "--org", "a", "--payload", "{nope"]) == 2
    err = capsys.readouterr().err
    assert err.strip().startswith("jobs: --payload is not valid JSON")
    assert main(["ls", "--limit", "0"]) == 2
    assert "at least 1" in capsys.readouterr().err
    assert main(["frobnicate"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_payload_problems_name_each_field() -> None:
    from jobs_cli.errors import payload_problems

    text = payload_problems(
        [
            {"loc": ["payload", "import_id"], "msg": "must be a UUID"},
            {"loc": ("body", "payload", "n", 0), "msg": "too small"},
            {"msg": "extra fields not permitted"},
        ]
    )
    assert text == "import_id: must be a UUID; n.0: too small; extra fields not permitted"
    assert payload_problems([]) == "rejected by the job type's schema"
