"""The protocol's pure parts: stderr lines, the report, exit statuses."""

from __future__ import annotations

import pytest
from jobs_core import protocol
from jobs_core.protocol import Checkpoint, ContextWrite, Progress, ProtocolError, Text


def test_progress_lines_give_a_fraction_and_a_stage() -> None:
    assert protocol.parse_line("PROGRESS:0.10 connecting\n") == Progress(0.1, "connecting")
    assert protocol.parse_line("PROGRESS:1") == Progress(1.0, "")
    assert protocol.parse_line("PROGRESS:0.5   two words ") == Progress(0.5, "two words")


@pytest.mark.parametrize(
    "line", ["PROGRESS:abc x", "PROGRESS:1.5 x", "PROGRESS:-0.1", "PROGRESS:nan"]
)
def test_a_malformed_progress_line_is_a_protocol_error(line: str) -> None:
    with pytest.raises(ProtocolError, match="PROGRESS"):
        protocol.parse_line(line)


def test_checkpoint_and_context_lines_carry_json_objects() -> None:
    assert protocol.parse_line('CHECKPOINT:{"row": 5}') == Checkpoint({"row": 5})
    assert protocol.parse_line(protocol.format_checkpoint({"a": [1]})) == Checkpoint({"a": [1]})
    line = protocol.format_context({"done": 3, "total": 9}, force=True)
    assert protocol.parse_line(line) == ContextWrite({"done": 3, "total": 9}, True)
    with pytest.raises(ProtocolError, match="JSON object"):
        protocol.parse_line("CHECKPOINT:[1, 2]")
    with pytest.raises(ProtocolError, match="CHECKPOINT"):
        protocol.parse_line("CHECKPOINT:{oops")


def test_other_lines_are_text_cut_to_a_bounded_length() -> None:
    assert protocol.parse_line("Traceback (most recent call last):") == Text(
        "Traceback (most recent call last):"
    )
    long = protocol.parse_line("x" * 5000)
    assert isinstance(long, Text)
    assert len(long.text) == protocol.LINE_MAX_CHARS


def test_the_report_is_exactly_one_json_object() -> None:
    assert protocol.parse_report(b' {"a": 1}\n') == {"a": 1}
    for bad, why in [(b"", "without a report"), (b"[1]", "JSON object"), (b"{} {}", "not one")]:
        with pytest.raises(ProtocolError, match=why):
            protocol.parse_report(bad)


def test_exit_statuses_are_described_by_code_or_signal_name() -> None:
    assert protocol.describe_exit(3) == "exited with code 3"
    assert protocol.describe_exit(-11) == "killed by signal SIGSEGV"
    assert protocol.describe_exit(-9) == "killed by signal SIGKILL"
    assert protocol.EXIT_RETRYABLE == 75


def test_the_stderr_tail_keeps_the_last_lines_and_counts_the_rest() -> None:
    tail = protocol.StderrTail(limit=3)
    for index in range(5):
        tail.add(f"line {index}")
    assert tail.lines() == ["line 2", "line 3", "line 4"]
    assert tail.text().startswith("[2 earlier lines dropped]")


def test_the_worker_logs_the_head_of_stderr_and_counts_the_rest() -> None:
    tail = protocol.StderrTail()
    logged = [tail.add(f"line {index}") for index in range(protocol.LOG_LINES + 5)]
    assert logged == [True] * protocol.LOG_LINES + [False] * 5
    message = tail.unlogged()
    assert message is not None
    assert message.startswith("5 more stderr lines of the child were not logged")
    wide = protocol.StderrTail()
    assert sum(wide.add("w" * 1000) for _ in range(100)) == protocol.LOG_BYTES // 1000


def test_an_oversized_checkpoint_line_is_too_long_never_quoted() -> None:
    line = "CHECKPOINT:" + '{"a": "' + "x" * protocol.CHECKPOINT_MAX_BYTES + '"}'
    with pytest.raises(protocol.LineTooLong) as refused:
        protocol.parse_line(line)
    assert "CHECKPOINT:" in str(refused.value)
    assert "xxx" not in str(refused.value)
    assert protocol.protocol_prefix(b"JOBCTX:{") == "JOBCTX:"
    assert protocol.protocol_prefix(b"text") is None


def test_the_checkpoint_of_an_earlier_attempt_is_read_from_the_progress() -> None:
    assert protocol.checkpoint_of({"done": 1, "checkpoint": {"row": 7}}) == {"row": 7}
    assert protocol.checkpoint_of({"done": 1}) is None
    assert protocol.checkpoint_of(None) is None
