"""Chunking: heading paths, token budgets with the real tokenizer, sentence fallback, table row groups."""

from __future__ import annotations

import collections

from ragd.embed import default_token_counter
from ragd.ingest.chunk import chunk_blocks
from ragd.ingest.extract.markdown import markdown_blocks
from ragd.ingest.extract.text import text_blocks
from ragd.ingest.normalize import normalize_text
from ragd.types import Block, ChunkPolicy

COUNTER = default_token_counter()


def sentence(i: int) -> str:
    return f"Sentence number {i} talks about the quarterly maintenance window of the cluster."


def test_heading_paths_and_boundaries() -> None:
    md = "# Guide\n\nIntro.\n\n## Setup\n\nInstall it.\n\n### Linux\n\nUse apt.\n\n## Usage\n\nRun it.\n"
    chunks, _ = chunk_blocks(markdown_blocks(md), ChunkPolicy(), COUNTER)
    assert [(c.heading_path, c.content) for c in chunks] == [
        (("Guide",), "Intro."),
        (("Guide", "Setup"), "Install it."),
        (("Guide", "Setup", "Linux"), "Use apt."),
        (("Guide", "Usage"), "Run it."),
    ]
    assert [c.chunk_index for c in chunks] == [0, 1, 2, 3]


def test_paragraphs_pack_to_target_and_long_ones_split_at_sentences() -> None:
    paragraphs = [" ".join(sentence(p * 10 + i) for i in range(6)) for p in range(12)]
    policy = ChunkPolicy()
    chunks, _ = chunk_blocks(text_blocks("\n\n".join(paragraphs)), policy, COUNTER)
    assert len(chunks) > 1
    for c in chunks:
        assert c.token_count == COUNTER.count(c.content)
        assert c.token_count <= policy.max_tokens
    assert all(c.token_count >= policy.min_tokens for c in chunks[:-1])
    huge = " ".join(sentence(i) for i in range(120))  # one paragraph of ~2000 tokens
    chunks, _ = chunk_blocks([Block("paragraph", huge)], policy, COUNTER)
    assert len(chunks) >= 4 and all(c.token_count <= policy.max_tokens for c in chunks)
    assert all(c.content.endswith(".") for c in chunks)  # cut between sentences
    assert " ".join(c.content for c in chunks) == huge
    word_soup = "lorem " * 3000  # no sentence boundary at all
    chunks, _ = chunk_blocks([Block("paragraph", word_soup.strip())], policy, COUNTER)
    assert all(c.token_count <= policy.hard_cap_tokens for c in chunks)


def test_tables_split_between_rows_with_header_repeated() -> None:
    header = ("Incident", "Date", "Severity", "Service", "Minutes down")
    rows = tuple((f"INC-{2000 + i}", f"2026-01-{i % 28 + 1:02d}", "high", "payments", str(i)) for i in range(120))
    chunks, warnings = chunk_blocks([Block("table", "", header=header, rows=rows)], ChunkPolicy(), COUNTER)
    assert len(chunks) >= 3 and not warnings
    covered = []
    for c in chunks:
        assert c.chunk_type == "table"
        assert c.content.startswith("| Incident | Date | Severity | Service | Minutes down |")
        assert c.token_count <= 800
        first, last = c.metadata["rows"]
        assert last - first <= 50
        covered += list(range(first, last))
        assert c.metadata["format"] == "markdown"
        assert c.metadata["csv"].splitlines()[0] == "Incident,Date,Severity,Service,Minutes down"
    assert covered == list(range(120))
    big_row = (("x " * 900).strip(), "b")
    chunks, warnings = chunk_blocks([Block("table", "", header=("A", "B"), rows=(big_row, ("c", "d")))],
                                    ChunkPolicy(), COUNTER)
    assert len(chunks) == 2 and "warning" in chunks[0].metadata and len(warnings) == 1


def test_normalize_is_locale_free_and_dehyphenates() -> None:
    assert normalize_text("Cafe\u0301  au\tlait\r\nexam-\nple\n\n\n\nend") == "Café au lait\nexample\n\nend"


class _Tally:
    """The real counter, tallying each text it encodes."""

    def __init__(self) -> None:
        self.seen: collections.Counter[str] = collections.Counter()

    def count(self, text: str) -> int:
        self.seen[text] += 1
        return COUNTER.count(text)

    def count_many(self, texts: list[str]) -> list[int]:
        self.seen.update(texts)
        return COUNTER.count_many(texts)

    def offsets(self, text: str) -> list[tuple[int, int]]:
        return COUNTER.offsets(text)


def test_every_token_count_is_exact_and_each_text_is_encoded_once() -> None:
    rows = "\n".join(f"| r{i} | {sentence(i)} | {i * 7} |" for i in range(70))
    md = ("# Report\n\nShort intro.\n\n## Method\n\n" + "\n\n".join(sentence(i) for i in range(40))
          + "\n\n- item one\n- item two\n\n```\ncode = 1\n```\n\n## Data\n\n| id | text | n |\n|---|---|---|\n"
          + rows + "\n\n## Long\n\n" + " ".join(sentence(i) for i in range(150))
          + "".join(f"\n\n## Part {i}\n\nPart {i} stands alone." for i in range(12)) + "\n\n## Empty heading\n")
    tally = _Tally()
    chunks, _ = chunk_blocks(markdown_blocks(md), ChunkPolicy(), tally)  # type: ignore[arg-type]
    assert {"paragraph", "table"} <= {c.chunk_type for c in chunks} and len(chunks) > 20
    for c in chunks:
        assert c.token_count == COUNTER.count(c.content), c.content[:80]
    # a chunk made of one unit (a paragraph under its own heading) reuses the unit's count: encoded once, not twice
    alone = [c.content for c in chunks if c.content.endswith("stands alone.")]
    assert len(alone) == 12
    assert [tally.seen[text] for text in alone] == [1] * 12
