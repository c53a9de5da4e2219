"""Answerability beyond relevance (issue 30, item 1): on look-alike documents the evidence must answer *this*
question: its years, quoted terms and names, an answer of the kind asked, its words and their pairs. The
end-to-end case is generated with exact truth: one policy for many countries, half of them ingested."""

from __future__ import annotations

import random
import uuid

import ragd
from ragd.answer.answerable import (
    Check,
    Limits,
    Passage,
    Question,
    answer_type,
    check,
    constraints,
    content_stems,
    folded,
    judge,
    phrases,
)
from ragd.types import Candidate


def _c(i: int, text: str, title: str | None = None, kind: str = "paragraph", p: float = 0.9) -> Candidate:
    import math

    return Candidate(chunk_id=uuid.UUID(int=i), doc_id=uuid.UUID(int=100 + i), doc_version_id=uuid.UUID(int=i),
                     chunk_index=0, content=text, title=title, chunk_type=kind, rerank_score=math.log(p / (1 - p)))


def test_what_a_question_pins_down() -> None:
    assert constraints("What was Old Briton's response to Celeron in 1749 and \"the raid\"?") == [
        "1749", "the raid", "Old", "Briton", "Celeron"]
    assert constraints("Who did the Ottoman empire ally with in WW I?") == ["Ottoman"]  # "WW" is too short
    assert folded("Skłodowska-Curie, Céloron") == "sklodowska-curie, celoron"
    # framing words ("how many", "change", "highest") are not what the evidence must say
    assert content_stems("How long did the change in net receivables take in which year was it highest?") == [
        "net", "receiv", "take"]
    # nor the possessive's "s", nor "go" of "go up" / "go down"
    assert content_stems("why did quorra's inventory go up at the end of 2023?") == [
        "quorra", "inventori", "end", "2023"]
    assert phrases("What was the change in Other miscellaneous assets between 2018 and 2019?") == [
        ("miscellan", "asset")]
    assert [answer_type(q) for q in ("How many beds are there?", "When did it open?", "In which year was it?",
                                     "Who founded it?", "What is the policy?")] == [
        "number", "date", "date", "name", None]


def test_an_issuer_its_documents_name_is_no_word_pair_the_passage_must_hold() -> None:
    # "JnJ's US sales": the possessive's "s" is no word; "JnJ realised" is what the filing says as "we realised"
    assert phrases("How did JnJ's US sales grow?") == [("jnj", "us"), ("us", "sale")]
    assert phrases("How did JnJ\u2019s US sales grow?") == [("jnj", "us"), ("us", "sale")]
    passage = _c(1, "Following the exchange offer, we realised cash proceeds of approximately $13.2 billion from "
                    "the separation of Kenvue.", title="Johnson & Johnson \u00b7 Form 8-K")
    other = _c(2, "Acme expects the separation to be completed next year.", title="Acme Corp \u00b7 Form 10-K")
    question = "How much cash did JnJ realise from the separation of Kenvue?"  # two sources: every check applies
    assert judge(question, [passage, other], {}, 100, threshold=0.15, reranked=True).abstain
    named = judge(question, [passage, other], {}, 100, threshold=0.15, reranked=True, satisfied=frozenset({"JnJ"}))
    assert not named.abstain and [c.chunk_id for c in named.evidence] == [passage.chunk_id], named.reason


def test_one_issuers_filings_are_look_alikes_even_when_one_alone_is_relevant() -> None:
    # the question's words scattered: "business" and "intensive" further apart than a phrase's window
    passage = _c(1, "Capital spending in 2022 was $1.7 billion. The business reported data on all of its many "
                    "intensive care products. Results were based on sales.",
                 title="Quorra \u00b7 Form 10-K \u00b7 fiscal year 2022")
    question = "Is Quorra a capital intensive business based on 2022 data?"
    one = judge(question, [passage], {}, 100, threshold=0.15, reranked=True, satisfied=frozenset({"Quorra"}))
    assert not one.abstain  # one source: its wording differs from the question's, nothing competes
    kin = judge(question, [passage], {}, 100, threshold=0.15, reranked=True, satisfied=frozenset({"Quorra"}),
                lookalikes=True)
    assert kin.abstain and "capit intens" in kin.reason  # the issuer's other years compete: its words must hold


def test_a_table_holds_a_pair_in_a_row_or_a_row_and_its_header() -> None:
    table = Passage.of(_c(1, " | 2019 | 2018\nNet receivables | 10 | 8\nOther assets | 3 | 4", kind="table"))
    prose = Passage.of(_c(2, "Receivables were net of allowances. Other current assets grew."))
    assert ("net", "receiv") in table.pairs and ("2019", "receiv") in table.pairs
    assert ("net", "receiv") in prose.pairs  # "receivables were net": near, in either order
    assert ("receiv", "asset") not in prose.pairs  # another sentence


def test_each_check_decides_and_says_what_was_missing() -> None:
    dfs, n = {"liquid": 1, "revenu": 30, "total": 40}, 100

    def _check(question: str, candidate: Candidate) -> Check:
        return check(Question.of(question, dfs, n, limits), Passage.of(candidate), "1", limits)

    revenue = _c(1, "Total revenue was 5,120 in 2019 and 4,800 in 2018.", title="Acme annual report")
    other = _c(2, "Total revenue was 3,100 in 2019.", title="Globex annual report")
    limits = Limits()
    ok = _check("What was the total revenue of Acme in 2019?", revenue)
    assert ok.passed and ok.coverage == 1.0
    year = _check("What was the total revenue in 2016?", revenue)
    assert not year.passed and year.missing == ("2016",)
    name = _check("What was the total revenue of Initech in 2019?", revenue)
    assert not name.passed and "Initech" in name.missing
    words = _check("What was total liquidity in 2019?", revenue)
    assert not words.passed and words.coverage < 0.5
    # two sources compete: the strict checks apply and name the check that decided
    judged = judge("What was total liquidity in 2019?", [revenue, other], dfs, n, threshold=0.15,
                   reranked=True)
    assert judged.abstain and judged.check == "coverage" and judged.reason.startswith("not enough evidence")
    assert judge("What was the total revenue of Acme in 2016?", [revenue, other], dfs, n, threshold=0.15,
                 reranked=True).check == "constraints"
    passed = judge("What was the total revenue of Acme in 2019?", [other, revenue], dfs, n, threshold=0.15,
                   reranked=True)
    assert not passed.abstain and passed.evidence == (revenue,)  # only what passed may be quoted
    # partial evidence: the years it holds are answered, the ones it lacks are said
    part = judge("What was the total revenue of Acme in 2019 and 2016?", [revenue, other], dfs, n,
                 threshold=0.15, reranked=True)
    assert not part.abstain and part.check == "partial" and part.missing == ("2016",)
    assert part.evidence == (revenue,) and part.reason == "the documents do not cover 2016"
    # below the rerank threshold a candidate is not evidence at all
    weak = _c(3, "Total revenue of Acme was 5,120 in 2019.", title="Acme annual report", p=0.05)
    assert judge("What was the total revenue of Acme in 2019?", [weak], dfs, n, threshold=0.15,
                 reranked=True).check == "relevance"
    assert judge("How many offices does Acme have?", [revenue], dfs, n, threshold=0.15,
                 reranked=True).check == "answerable"  # a figure is there
    assert judge("Who is the chief executive of Acme?", [_c(4, "the board meets monthly.", title="acme")], dfs, n,
                 threshold=0.15, reranked=True, limits=Limits(names=False)).check == "answer_type"


COMPANIES = ["Acme", "Borealis", "Cobalt", "Dunmore", "Everlake", "Fairhaven", "Granite", "Halcyon", "Ironwood",
             "Juniper", "Kestrel", "Lumen"]


def _report(rng: random.Random, company: str) -> tuple[dict[str, str], dict[str, int]]:
    """One company's annual report, as every other company's but for its figures: the name is in the title
    only, as in a report's running header."""
    figures = {"revenue": rng.randrange(1000, 9000), "income": rng.randrange(100, 900),
               "staff": rng.randrange(50, 5000)}
    text = "\n\n".join([
        "## Results of operations", "Our results for the year were as follows:",
        "| | 2019 | 2018 |\n| --- | --- | --- |\n"
        f"| Net revenue | {figures['revenue']:,} | {figures['revenue'] - 250:,} |\n"
        f"| Operating income | {figures['income']:,} | {figures['income'] - 40:,} |",
        f"At year end the company employed {figures['staff']:,} people."])
    return ({"id": f"report-{company}", "title": f"{company} annual report 2019", "text": text,
             "source_type": "markdown"}, figures)


def test_questions_about_a_company_not_in_the_collection_are_abstained_on(client: ragd.Ragd, name: str) -> None:
    rng = random.Random(30)
    reports = {company: _report(rng, company) for company in COMPANIES}
    ingested = COMPANIES[::2]
    col = client.collection(name)
    col.ingest(documents=[reports[c][0] for c in ingested])
    answered_right, decided = 0, []
    for company in COMPANIES:
        answer = col.ask(f"What was the net revenue of {company} in 2019?", debug=True)
        assert answer.debug is not None
        if company in ingested:
            cited = {c["title"] for c in answer.citations}
            answered_right += (not answer.abstained and f"{reports[company][1]['revenue']:,}" in answer.answer
                               and cited == {f"{company} annual report 2019"})
        else:
            assert answer.abstained, (company, answer.answer)
            decided.append(answer.debug["evidence"]["check"])
            if decided[-1] == "constraints":
                assert f"no passage says {company}" in answer.debug["answerability"]["reason"]
    # the checks take nothing away from the questions the collection answers
    assert answered_right == len(ingested)
    assert set(decided) <= {"relevance", "constraints"}, decided
    # a year the reports do not cover: the closest passages are shown as not enough evidence, with what they lack
    answer = col.ask("What was the net revenue of Acme in 2016?", debug=True)
    assert answer.abstained and answer.citations == () and answer.debug is not None
    assert answer.debug["evidence"]["check"] == "constraints"
    assert answer.reason == "not enough evidence: no passage says 2016"
    assert answer.closest and answer.closest[0]["title"] == "Acme annual report 2019"
    assert "2016" in answer.closest[0]["missing"]
    partial = col.ask("What was the net revenue of Acme in 2019 and 2016?", debug=True)
    assert not partial.abstained and partial.answer.endswith("(The documents do not cover 2016.)")
    assert {c["title"] for c in partial.citations} == {"Acme annual report 2019"}


def test_a_name_is_found_however_its_words_are_joined() -> None:
    # "IFRS9" in the question, "IFRS 9" in the report; "e-commerce" against "ecommerce": one name
    passage = _c(1, "The adoption of IFRS 9 on 1 January 2018 increased the loss allowance by 12 million. Our "
                    "ecommerce sales rose.", title="Acme plc \u00b7 Annual Report 2018")
    for question in ("What was the effect of adopting IFRS9 on the loss allowance?",
                     "How much did the loss allowance change on adopting \"IFRS-9\"?"):
        judged = judge(question, [passage], {}, 100, threshold=0.15, reranked=True)
        assert not judged.abstain, judged.reason
    assert judge("What was the effect of adopting IFRS10 on the loss allowance?", [passage], {}, 100,
                 threshold=0.15, reranked=True).abstain
