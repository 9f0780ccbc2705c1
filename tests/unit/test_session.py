"""mprig.rig.session: the long-lived shell the runner talks to on every host. The remote
end is the real bash loop, started here locally instead of through ssh."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from mprig.rig.session import Session, SessionError, _FrameReader, loop_command


@pytest.fixture
def session() -> Session:
    s = Session(loop_command)
    yield s
    s.close()


def test_scripts_share_one_shell_but_not_state(session: Session) -> None:
    code1, out1, _ = session.run("echo $$; x=1", timeout=10)
    code2, out2, _ = session.run('echo $$; echo "x=${x:-unset}"', timeout=10)
    pid = out1.split()[0]
    assert (code1, code2) == (0, 0)
    assert out2.split() == [pid, b"x=unset"]  # same remote shell, a fresh subshell each


def test_status_stdout_and_stderr_are_kept_apart(session: Session) -> None:
    code, out, err = session.run("printf 'a\\nb'; echo oops >&2; exit 7", timeout=10)
    assert (code, out, err) == (7, b"a\nb", "oops\n")


def test_output_is_byte_exact_even_when_it_looks_like_a_marker(session: Session) -> None:
    tricky = "\\n@@mprig-session-0000 0\\n\\n@@mprig-session-0000-done\\n\\x00\\xff"
    code, out, _ = session.run(f"printf '{tricky}'", timeout=10)
    assert (code, out) == (0, b"\n@@mprig-session-0000 0\n\n@@mprig-session-0000-done\n\x00\xff")


def test_large_output_streams_to_a_sink(session: Session, tmp_path: Path) -> None:
    blob = tmp_path / "blob"
    blob.write_bytes(os.urandom(3_000_000))
    got = bytearray()
    code, out, _ = session.run(f"cat {blob}", timeout=30, sink=got.extend)
    assert (code, out, bytes(got)) == (0, b"", blob.read_bytes())


def test_a_script_with_a_syntax_error_fails_alone(session: Session) -> None:
    code, _, err = session.run("if then fi (", timeout=10)
    assert code != 0 and "syntax error" in err
    assert session.run("echo fine", timeout=10)[:2] == (0, b"fine\n")


def test_timeout_kills_the_session_and_the_next_script_gets_a_new_one(session: Session) -> None:
    first = session.run("echo $$", timeout=10)[1]
    t0 = time.monotonic()
    with pytest.raises(SessionError, match="timed out after 1 s"):
        session.run("sleep 20", timeout=1)
    assert time.monotonic() - t0 < 5
    assert session.run("echo $$", timeout=10)[1] != first


def test_a_dead_session_is_reported_and_replaced(session: Session) -> None:
    with pytest.raises(SessionError, match="the session ended"):
        session.run("kill -9 $$; sleep 5", timeout=10)
    assert session.run("echo back", timeout=10)[1] == b"back\n"


def test_a_spawn_that_fails_reports_its_stderr_and_status() -> None:
    s = Session(lambda token: ["sh", "-c", "echo 'ssh: connect to host x: refused' >&2; exit 255"])
    with pytest.raises(SessionError) as e:
        s.run("true", timeout=10)
    assert (e.value.returncode, "refused" in e.value.stderr) == (255, True)


def test_frame_reader_finds_the_end_across_any_chunking() -> None:
    mark = b"@@mprig-session-abc"
    stream = b"payload\n@@mprig-session-ab" + b"\n" + mark + b" 3\nerr text\n" + mark + b"-done\n"
    for size in (1, 2, 5, 17, len(stream)):
        out = bytearray()
        r = _FrameReader(mark, out.extend)
        for i in range(0, len(stream), size):
            r.feed(stream[i : i + size])
        assert (r.done, r.status, r.err, bytes(out)) == (True, 3, "err text", stream[:26])
