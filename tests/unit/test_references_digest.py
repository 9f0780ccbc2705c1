"""Every shipped reference re-read against the words it was transcribed from (issue 15 part
1): the tables through test_references.quoted(), every other row here, from a phrase of the
digest (../shared/PAPERS.md) or, where the digest does not quote the number, of the paper's
own text (../shared/seeds/). A row added without its phrase, or a value that drifts from it,
fails. A clone without ../shared reads the copies in tests/digest/ (tests/papers_digest.py),
checked here against the originals wherever those are present."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable

import papers_digest
import pytest
from test_references import quoted, shipped


def one(groups: tuple[str, ...]) -> float:
    return float(groups[0].replace(" ", ""))


def total(groups: tuple[str, ...]) -> float:
    return sum(float(g) for g in groups)


def midpoint(groups: tuple[str, ...]) -> float:
    return total(groups) / len(groups)


def gbit(groups: tuple[str, ...]) -> float:
    return 1000 * float(groups[0])


def stated(value: float) -> Callable[[tuple[str, ...]], float]:
    """A bound the phrase states in words ("beats", "equal", "doubles")."""
    return lambda groups: value


Quote = tuple[str, str, Callable[[tuple[str, ...]], float]]

# (reference ids, a shell pattern allowed), the phrase (a regex on the text with whitespace
# runs made one space), the value from the phrase's groups
DIGEST_TEXT: list[Quote] = [
    # 000: 15, not 5: test_references.test_the_paper_000_tcp_maximum_is_15_and_the_file_says_why
    ("000-text-s[12]-tcp-max", r"max 5 Mbit/s \(scenario 1 text\) / (\d+) Mbit/s", one),
    ("000-text-s1-*-gain-le50m", r"up to 50 m TCP-DOOR and PR-R \+(\d+) %", one),
    ("000-text-s1-prr-gain-gt50m", r"beyond 50 m PR-R \+(\d+) % on average", one),
    ("000-text-s1-dsack-gain-gt50m", r"on average, D-SACK \+([\d.]+) %", one),
    ("000-text-s2-tcpdoor-gain-pdr0", r"TCP-DOOR \+(\d+) % at PDR 0", one),
    ("000-text-s2-prr-gain", r"PR-R \+(\d+) % on average and stable", one),
    ("000-text-s2-nopr-max", r"NoPR never above (\d+) Mbit/s", one),
    ("000-text-s2-dsack-max", r"D-SACK at most ([\d.]+) Mbit/s", one),
    ("001-cwa-goodput", r"CWA goodput approaches the (\d+) Mbit/s aggregate", one),
    ("001-cwa-rcvbuf", r"CWA receive buffer is about the (\d+)-packet minimum", one),
    ("001-mptcp-goodput",
     r"path 2 average ([\d.]+) Mbit/s.*plain MPTCP goodput is close to the slow path", one),
    ("002-a-rbpm-packets", r"Case A:.*?RBPM ([\d.]+) pkt/s", one),
    ("002-a-rbpm-bytes", r"Case A:.*?RBPM [\d.]+ pkt/s, ([\d ]+) B/s", one),
    ("002-a-original-packets", r"Case A:.*?original MPTCP ([\d.]+) pkt/s", one),
    ("002-a-original-bytes", r"Case A:.*?original MPTCP [\d.]+ pkt/s, ([\d ]+) B/s", one),
    ("002-a-gain", r"Case A:.*?\(about (\d+)x\)", one),
    ("002-b-rbpm-packets", r"Case B:.*?RBPM ([\d.]+) pkt/s", one),
    ("002-b-rbpm-bytes", r"Case B:.*?RBPM [\d.]+ pkt/s, ([\d ]+) B/s", one),
    ("002-b-original-packets", r"Case B:.*?original ([\d.]+) pkt/s", one),
    ("002-b-original-bytes", r"Case B:.*?original [\d.]+ pkt/s, ([\d ]+) B/s", one),
    ("002-b-gain", r"Case B:.*?\(about (\d+)x\)", one),
    ("003-text-tcp-max-11g", r"single TCP over 11g max (\d+) Mbit/s", one),
    ("003-text-s1-tcpdoor-max", r"scenario 1 TCP-DOOR up to (\d+) Mbit/s", one),
    ("003-text-s1-*tcpdoor-gain*", r"up to 25 Mbit/s \(\+(\d+) % over NoPR\)", one),
    ("003-text-s[13]-beyond80m", r"beyond 80 m the 54 Mbit/s mode falls below (\d+)", one),
    ("003-text-s3-dsack-max-lt50m", r"scenario 3 D-SACK up to (\d+) Mbit/s below 50 m", one),
    ("003-text-s3-*-max", r"NoPR and Eifel never above (\d+) Mbit/s", one),
    ("003-text-s4-*-range", r"scenario 4 D-SACK and F-RTO (\d+)-(\d+) Mbit/s", midpoint),
    ("003-text-s4-nopr-max", r"F-RTO \d+-\d+ Mbit/s, NoPR below (\d+) Mbit/s", one),
    ("004-rcvbuf-3g-wifi", r"Wi-Fi 8 Mbit/s 20 ms needs (\d+) KB", one),
    ("004-rcvbuf-3g-alone", r"\(3G alone (\d+) KB", one),
    ("004-rcvbuf-wifi-alone", r"Wi-Fi alone about (\d+) KB\)", one),
    ("004-rcvbuf-fills-both", r"3G (\d+) Mbit/s 150 ms \+ Wi-Fi (\d+) Mbit/s 20 ms", total),
    ("004-f4-plain-370kb",
     r"Wi-Fi-like (\d+) Mbit/s.*?3G-like (\d+) Mbit/s.*?Even 370 KB does not fill both", total),
    ("004-f4-tcp-beats-plain", r"TCP over Wi-Fi beats plain MPTCP below 400 KB", stated(1)),
    ("004-f6a-m12-gain-200kb", r"M1\+M2 give (\d+)x throughput around 200 KB", one),
    ("004-f6b-m12-250kb", r"(\d+) Gbit/s \+ 100 Mbit/s links: M1,2 use both with 250", gbit),
    ("004-f6b-plain-2mb", r"(\d+) Gbit/s \+ 100 Mbit/s links: .*plain MPTCP needs >= 2 MB",
     gbit),
    ("004-f6c-symmetric", r"Fig\. 6\(c\): three symmetric links: equal", stated(1)),
    ("004-f9-never-below-tcp", r"MPTCP never below TCP", stated(1)),
    ("004-f9-2x-500kb", r"about (\d+)x TCP at 500 KB buffer", one),
    ("004-f9-gain-100kb", r"\+(\d+) % at 100 KB", one),
    ("004-f11-http-2x-large", r"MPTCP doubles TCP above 100 KB files", stated(2)),
    ("004-f11-http-small", r"doubles TCP above 100 KB files, loses below 30 KB", stated(1)),
    ("004-middlebox-syn-strip", r"(\d+) % of paths strip new options from SYN", one),
    ("004-middlebox-syn-strip-port80", r"from SYN \((\d+) % on port 80\)", one),
    ("004-middlebox-isn-rewrite", r"(\d+) % rewrite ISNs", one),
    ("004-middlebox-unseen-ack", r"(\d+) % do not pass an ACK for unseen data", one),
]  # fmt: skip

# numbers the digest leaves out, from the paper's own text
SEED_TEXT: list[Quote] = [
    ("003-text-s1-*-dsack-gain-co", r"less gThroughput gain \((\d+)%\) with other CCs", one),
]

TEXT = [("digest", *q) for q in DIGEST_TEXT] + [("seed", *q) for q in SEED_TEXT]


def text(where: str, paper: str) -> str:
    return (
        papers_digest.section(paper) if where == "digest" else papers_digest.seed_or_quotes(paper)
    )


def covering(ref_id: str) -> list[int]:
    return [i for i, (_, pattern, *_) in enumerate(TEXT) if fnmatch.fnmatchcase(ref_id, pattern)]


def test_every_reference_has_exactly_one_source_phrase() -> None:
    tables = set(quoted())
    rows = {i: covering(i) for i in shipped() if i not in tables}
    assert {i: c for i, c in rows.items() if len(c) != 1} == {}
    assert not any(covering(i) for i in tables)
    unused = [p for _, p, *_ in TEXT if not fnmatch.filter(shipped(), p)]
    assert unused == []


@pytest.mark.parametrize(("where", "pattern", "phrase", "value"), TEXT, ids=[t[1] for t in TEXT])
def test_each_text_row_holds_the_value_of_its_phrase(
    where: str, pattern: str, phrase: str, value: Callable[[tuple[str, ...]], float]
) -> None:
    ids = fnmatch.filter(shipped(), pattern)
    paper = ids[0][:3]
    m = re.search(phrase, text(where, paper))
    assert m is not None, f"{where} of paper {paper} has no {phrase!r}"
    assert {i: shipped()[i].ref.value for i in ids} == {
        i: pytest.approx(value(m.groups())) for i in ids
    }


def test_the_copies_are_the_originals_where_the_originals_are_present() -> None:
    """tests/digest/PAPERS.md is ../shared/PAPERS.md, and each copied sentence is in its
    paper's text; in a checkout without ../shared the copies are all there is, and this
    checks that they hold what the rows quote (the tests above)."""
    original = papers_digest.SHARED / "PAPERS.md"
    if original.is_file():
        assert (papers_digest.COPY / "PAPERS.md").read_text() == original.read_text()
    quotes = papers_digest.copied_seed_quotes()
    assert quotes and all(quotes.values())
    for paper, sentences in quotes.items():
        own = papers_digest.seed(paper)
        assert own is None or all(s in own for s in sentences), paper
